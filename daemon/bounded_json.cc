#include "daemon/bounded_json.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace sluice::daemon {
namespace {

using Json = nlohmann::ordered_json;

// Builds the kept part of the document; a nullptr on the stack is a
// container being dropped (everything inside it is dropped too).
class BoundedBuilder : public nlohmann::json_sax<Json> {
 public:
  BoundedBuilder(const std::function<bool(const std::string&)>& keep, const JsonBounds& bounds)
      : keep_(keep), bounds_(bounds) {}

  bool null() override { return Value(Json()); }
  bool boolean(bool v) override { return Value(Json(v)); }
  bool number_integer(number_integer_t v) override { return Value(Json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return Value(Json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return Value(Json(v)); }
  bool string(string_t& v) override { return Value(Json(std::move(v))); }
  bool binary(binary_t&) override { return Fail("binary values are not JSON"); }
  bool start_object(std::size_t) override { return Open(Json::object()); }
  bool start_array(std::size_t) override { return Open(Json::array()); }
  bool end_object() override { return Close(); }
  bool end_array() override { return Close(); }
  bool key(string_t& k) override {
    key_kept_ = stack_.size() != 1 || keep_(k);
    key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    // The parser's message quotes the offending token: keep it short.
    std::string what = e.what();
    if (what.size() > 160) what = absl::StrCat(what.substr(0, 160), "...");
    return Fail(absl::StrCat("the request body is not JSON: ", what));
  }

  Json& root() { return root_; }
  const std::string& error() const { return error_; }

 private:
  bool Fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
    return false;
  }

  // Where a new value goes: nullptr when it is dropped.
  Json* Place(Json&& v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Json* parent = stack_.back();
    if (parent == nullptr) return nullptr;
    if (parent->is_object()) {
      if (!key_kept_) return nullptr;
      Json& slot = (*parent)[key_];
      slot = std::move(v);
      return &slot;
    }
    parent->push_back(std::move(v));
    return &parent->back();
  }

  bool Value(Json&& v) {
    Json* placed = Place(std::move(v));
    if (placed != nullptr && ++values_ > bounds_.max_values) {
      return Fail(absl::StrCat("the request body holds more than ", bounds_.max_values,
                               " JSON values"));
    }
    return true;
  }

  bool Open(Json&& container) {
    if (static_cast<int>(stack_.size()) >= bounds_.max_depth) {
      return Fail(absl::StrCat("the request body nests deeper than ", bounds_.max_depth));
    }
    Json* placed = Place(std::move(container));
    if (placed != nullptr && ++values_ > bounds_.max_values) {
      return Fail(absl::StrCat("the request body holds more than ", bounds_.max_values,
                               " JSON values"));
    }
    stack_.push_back(placed);
    return true;
  }

  bool Close() {
    stack_.pop_back();
    return true;
  }

  const std::function<bool(const std::string&)>& keep_;
  const JsonBounds bounds_;
  Json root_;
  std::vector<Json*> stack_;
  std::string key_;
  bool key_kept_ = true;
  size_t values_ = 0;
  std::string error_;
};

}  // namespace

absl::StatusOr<Json> ParseBoundedJson(absl::string_view text,
                                      const std::function<bool(const std::string&)>& keep_member,
                                      const JsonBounds& bounds) {
  BoundedBuilder builder(keep_member, bounds);
  const bool ok = Json::sax_parse(text.begin(), text.end(), &builder);
  if (!ok || !builder.error().empty()) {
    return absl::InvalidArgumentError(builder.error().empty()
                                          ? std::string("the request body is not JSON")
                                          : builder.error());
  }
  return std::move(builder.root());
}

}  // namespace sluice::daemon
