#include "model/grammar_json.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace sluice {
namespace {

// The JSON rules every grammar here shares.
constexpr char kJsonRules[] = R"(json-value ::= json-object | json-array | json-string | json-number | json-boolean | json-null
json-object ::= "{" ws ( json-string ws ":" ws json-value ws ( "," ws json-string ws ":" ws json-value ws )* )? "}"
json-array ::= "[" ws ( json-value ws ( "," ws json-value ws )* )? "]"
json-string ::= "\"" json-char* "\""
json-char ::= [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
json-number ::= "-"? json-int ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?
json-int ::= "0" | [1-9] [0-9]{0,15}
json-integer ::= "-"? json-int
json-boolean ::= "true" | "false"
json-null ::= "null"
ws ::= ( " " | "\n" [ \t]{0,20} )?
)";

constexpr int kMaxDepth = 64;

bool IsAnnotation(const std::string& k) {
  static const auto* const kAnnotations = new absl::flat_hash_set<std::string>{
      "title", "description", "default", "examples", "$schema", "$id", "$comment",
      "deprecated", "readOnly", "writeOnly", "$defs", "definitions"};
  return kAnnotations->contains(k);
}

std::string Sanitize(std::string_view hint) {
  std::string out;
  for (const char c : hint) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    out.push_back(ok ? c : '-');
  }
  if (out.empty()) out = "s";
  if (out.size() > 48) out.resize(48);
  return out;
}

std::string PathJoin(const std::string& path, absl::string_view part) {
  return absl::StrCat(path, "/", part);
}

}  // namespace

std::string GrammarLiteral(std::string_view bytes) {
  std::string out = "\"";
  for (const char c : bytes) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20) {
      absl::StrAppend(&out, "\\x", absl::Hex(u, absl::kZeroPad2));
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
  return out;
}

std::string JsonGrammar(bool object_only) {
  return absl::StrCat("root ::= ", object_only ? "json-object" : "json-value", "\n", kJsonRules);
}

absl::StatusOr<std::string> JsonSchemaToGrammar(std::string_view schema) {
  JsonSchemaCompiler c;
  auto rule = c.Add(schema, "root-schema", "json_schema");
  if (!rule.ok()) return rule.status();
  c.AddRule("root", *rule);
  return c.Grammar();
}

JsonSchemaCompiler::JsonSchemaCompiler() {
  for (const char* n : {"root", "json-value", "json-object", "json-array", "json-string", "json-char",
                        "json-number", "json-int", "json-integer", "json-boolean", "json-null", "ws"}) {
    names_.insert(n);
  }
}

void JsonSchemaCompiler::AddRule(const std::string& name, const std::string& body) {
  names_.insert(name);
  rules_.push_back({name, body});
}

std::string JsonSchemaCompiler::Grammar() const {
  std::string out;
  for (const auto& [name, body] : rules_) absl::StrAppend(&out, name, " ::= ", body, "\n");
  out += kJsonRules;
  return out;
}

std::string JsonSchemaCompiler::NewName(const std::string& hint) {
  std::string base = Sanitize(hint);
  std::string name = base;
  for (int i = 2; names_.contains(name); ++i) name = absl::StrCat(base, "-", i);
  names_.insert(name);
  return name;
}

absl::Status JsonSchemaCompiler::Fail(const std::string& path, const std::string& what) const {
  return absl::InvalidArgumentError(
      absl::StrCat(what_, ": ", what, " (at #", path.empty() ? "" : path, ")"));
}

absl::StatusOr<std::string> JsonSchemaCompiler::Add(std::string_view schema_json,
                                                    std::string_view name_hint,
                                                    std::string_view what) {
  Json doc = Json::parse(schema_json.begin(), schema_json.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(what), ": the schema is not JSON"));
  }
  return AddParsed(doc, name_hint, what);
}

absl::StatusOr<std::string> JsonSchemaCompiler::AddParsed(const Json& schema, std::string_view name_hint,
                                                    std::string_view what) {
  what_ = std::string(what);
  doc_ = &schema;
  doc_rule_ = NewName(std::string(name_hint));
  refs_.clear();
  refs_["#"] = doc_rule_;
  auto body = Body(schema, "", doc_rule_);
  if (!body.ok()) return body.status();
  AddRule(doc_rule_, *body);
  doc_ = nullptr;
  return doc_rule_;
}

absl::StatusOr<std::string> JsonSchemaCompiler::Visit(const Json& s, const std::string& path,
                                                      const std::string& hint) {
  const std::string name = NewName(hint);
  auto body = Body(s, path, name);
  if (!body.ok()) return body.status();
  AddRule(name, *body);
  return name;
}

absl::StatusOr<std::string> JsonSchemaCompiler::Ref(const std::string& ref, const std::string& path) {
  if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
  std::vector<std::string> parts;
  if (ref.rfind("#/", 0) == 0) {
    parts = absl::StrSplit(ref.substr(2), '/');
  } else {
    return Fail(path, absl::StrCat("$ref '", ref, "' is not supported (only \"#\", \"#/$defs/...\" and \"#/definitions/...\")"));
  }
  const Json* target = doc_;
  for (std::string p : parts) {
    // JSON pointer escapes.
    for (size_t k; (k = p.find("~1")) != std::string::npos;) p.replace(k, 2, "/");
    for (size_t k; (k = p.find("~0")) != std::string::npos;) p.replace(k, 2, "~");
    if (!target->is_object() || !target->contains(p)) {
      return Fail(path, absl::StrCat("$ref '", ref, "' does not resolve"));
    }
    target = &(*target)[p];
  }
  const std::string name = NewName(absl::StrCat("ref-", parts.back()));
  refs_[ref] = name;  // before the body: recursion refers to it
  auto body = Body(*target, ref.substr(1), name);
  if (!body.ok()) return body.status();
  AddRule(name, *body);
  return name;
}

absl::StatusOr<std::string> JsonSchemaCompiler::Body(const Json& s, const std::string& path,
                                                     const std::string& name) {
  if (++depth_ > kMaxDepth) {
    --depth_;
    return Fail(path, absl::StrCat("the schema nests deeper than ", kMaxDepth));
  }
  struct Leave {
    int* d;
    ~Leave() { --*d; }
  } leave{&depth_};
  if (s.is_boolean()) {
    if (s.get<bool>()) return std::string("json-value");
    return Fail(path, "the schema `false` allows no value");
  }
  if (!s.is_object()) return Fail(path, "a schema must be an object or a boolean");
  static const auto* const kHandled = new absl::flat_hash_set<std::string>{
      "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems",
      "minLength", "maxLength", "enum", "const", "anyOf", "allOf", "$ref", "format", "minimum", "maximum"};
  for (const auto& [k, v] : s.items()) {
    if (!IsAnnotation(k) && !kHandled->contains(k)) {
      return Fail(path, absl::StrCat("keyword '", k, "' is not supported"));
    }
  }
  auto only = [&](const char* keyword) -> absl::Status {
    for (const auto& [k, v] : s.items()) {
      if (k != keyword && !IsAnnotation(k)) {
        return Fail(path, absl::StrCat("keyword '", k, "' beside '", keyword, "' is not supported"));
      }
    }
    return absl::OkStatus();
  };
  if (auto it = s.find("$ref"); it != s.end()) {
    if (absl::Status st = only("$ref"); !st.ok()) return st;
    if (!it->is_string()) return Fail(path, "$ref must be a string");
    return Ref(it->get<std::string>(), path);
  }
  if (auto it = s.find("const"); it != s.end()) {
    if (absl::Status st = only("const"); !st.ok()) return st;
    return GrammarLiteral(it->dump());
  }
  if (auto it = s.find("enum"); it != s.end()) {
    for (const auto& [k, v] : s.items()) {
      if (k != "enum" && k != "type" && !IsAnnotation(k)) {
        return Fail(path, absl::StrCat("keyword '", k, "' beside 'enum' is not supported"));
      }
    }
    if (!it->is_array() || it->empty()) return Fail(path, "enum must be a non-empty array");
    std::vector<std::string> alts;
    for (const Json& v : *it) alts.push_back(GrammarLiteral(v.dump()));
    return absl::StrJoin(alts, " | ");
  }
  if (auto it = s.find("anyOf"); it != s.end()) {
    if (absl::Status st = only("anyOf"); !st.ok()) return st;
    if (!it->is_array() || it->empty()) return Fail(path, "anyOf must be a non-empty array");
    std::vector<std::string> alts;
    for (size_t i = 0; i < it->size(); ++i) {
      auto r = Visit((*it)[i], PathJoin(path, absl::StrCat("anyOf/", i)), absl::StrCat(name, "-", i));
      if (!r.ok()) return r.status();
      alts.push_back(*r);
    }
    return absl::StrJoin(alts, " | ");
  }
  if (auto it = s.find("allOf"); it != s.end()) {
    if (absl::Status st = only("allOf"); !st.ok()) return st;
    if (!it->is_array() || it->size() != 1) {
      return Fail(path, "allOf is supported with exactly one schema");
    }
    return Body((*it)[0], PathJoin(path, "allOf/0"), name);
  }
  std::vector<std::string> types;
  if (auto it = s.find("type"); it != s.end()) {
    if (it->is_string()) {
      types.push_back(it->get<std::string>());
    } else if (it->is_array() && !it->empty()) {
      for (const Json& t : *it) {
        if (!t.is_string()) return Fail(path, "type must be a string or an array of strings");
        types.push_back(t.get<std::string>());
      }
    } else {
      return Fail(path, "type must be a string or an array of strings");
    }
  } else if (s.contains("properties") || s.contains("required") ||
             s.contains("additionalProperties")) {
    types.push_back("object");
  } else if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) {
    types.push_back("array");
  } else if (s.contains("minLength") || s.contains("maxLength") || s.contains("format")) {
    types.push_back("string");
  } else {
    return std::string("json-value");
  }
  // Keywords that belong to a type the schema does not have.
  auto has_type = [&](const char* t) { return std::find(types.begin(), types.end(), t) != types.end(); };
  const std::pair<const char*, const char*> kOwner[] = {
      {"properties", "object"}, {"required", "object"}, {"additionalProperties", "object"},
      {"items", "array"}, {"minItems", "array"}, {"maxItems", "array"},
      {"minLength", "string"}, {"maxLength", "string"}, {"format", "string"},
      {"minimum", "integer"}, {"maximum", "integer"}};
  for (const auto& [k, t] : kOwner) {
    if (s.contains(k) && !has_type(t)) {
      return Fail(path, absl::StrCat("keyword '", k, "' is supported only with type \"", t, "\""));
    }
  }
  std::vector<std::string> alts;
  for (const std::string& t : types) {
    const std::string sub = types.size() == 1 ? name : absl::StrCat(name, "-", t);
    absl::StatusOr<std::string> b;
    if (t == "object") {
      b = ObjectBody(s, path, sub);
    } else if (t == "array") {
      b = ArrayBody(s, path, sub);
    } else if (t == "string") {
      b = StringBody(s, path);
    } else if (t == "number") {
      b = std::string("json-number");
    } else if (t == "integer") {
      b = IntegerBody(s, path);
    } else if (t == "boolean") {
      b = std::string("json-boolean");
    } else if (t == "null") {
      b = std::string("json-null");
    } else {
      return Fail(path, absl::StrCat("type '", t, "' is not a JSON Schema type"));
    }
    if (!b.ok()) return b.status();
    alts.push_back(types.size() == 1 ? *b : absl::StrCat("( ", *b, " )"));
  }
  return absl::StrJoin(alts, " | ");
}

absl::StatusOr<std::string> JsonSchemaCompiler::IntegerBody(const Json& s, const std::string& path) {
  // Bounds only where a sign or a digit count honours them exactly: minimum
  // 0 or 1 (or below -(10^15 - 1)), maximum at least 10^15 - 1 (then at most
  // 15 digits), as zod writes .int() (the safe-integer range) and .nonnegative().
  constexpr double kWide = 999999999999999.0;
  const auto lo = s.find("minimum"), hi = s.find("maximum");
  if (lo == s.end() && hi == s.end()) return std::string("json-integer");
  if ((lo != s.end() && !lo->is_number()) || (hi != s.end() && !hi->is_number())) {
    return Fail(path, "minimum and maximum must be numbers");
  }
  const double min = lo == s.end() ? -1e300 : lo->get<double>();
  const double max = hi == s.end() ? 1e300 : hi->get<double>();
  if (max < kWide) {
    return Fail(path, "keyword 'maximum' is supported on integers only at 999999999999999 or above");
  }
  if (min != 0 && min != 1 && min > -kWide) {
    return Fail(path, "keyword 'minimum' is supported on integers only as 0, 1 or -999999999999999 and below");
  }
  const std::string digits = max < 1e300 ? "{0,14}" : "{0,15}";
  const std::string positive = absl::StrCat("[1-9] [0-9]", digits);
  if (min == 1) return positive;
  if (min == 0) return absl::StrCat("\"0\" | ", positive);
  return absl::StrCat("\"-\"? ( \"0\" | ", positive, " )");
}

absl::StatusOr<std::string> JsonSchemaCompiler::StringBody(const Json& s, const std::string& path) {
  if (auto f = s.find("format"); f != s.end()) {
    if (s.contains("minLength") || s.contains("maxLength")) {
      return Fail(path, "format together with minLength/maxLength is not supported");
    }
    const std::string format = f->is_string() ? f->get<std::string>() : "";
    constexpr char kDate[] = R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] ))";
    constexpr char kTime[] =
        R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))";
    if (format == "date") return absl::StrCat("\"\\\"\" ", kDate, " \"\\\"\"");
    if (format == "time") return absl::StrCat("\"\\\"\" ", kTime, " \"\\\"\"");
    if (format == "date-time") return absl::StrCat("\"\\\"\" ", kDate, " \"T\" ", kTime, " \"\\\"\"");
    if (format == "uuid") {
      return std::string(
          R"("\"" [0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12} "\"")");
    }
    return Fail(path, absl::StrCat("format '", format, "' is not supported (date, time, date-time, uuid are)"));
  }
  auto count = [&](const char* k, int64_t* out) -> absl::Status {
    auto it = s.find(k);
    if (it == s.end()) return absl::OkStatus();
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 4096) {
      return Fail(path, absl::StrCat(k, " must be an integer in [0, 4096]"));
    }
    *out = it->get<int64_t>();
    return absl::OkStatus();
  };
  int64_t min = 0, max = -1;
  if (absl::Status st = count("minLength", &min); !st.ok()) return st;
  if (absl::Status st = count("maxLength", &max); !st.ok()) return st;
  if (min == 0 && max < 0) return std::string("json-string");
  if (max >= 0 && max < min) return Fail(path, "maxLength is below minLength");
  return absl::StrCat("\"\\\"\" json-char{", min, ",", max < 0 ? "" : absl::StrCat(max), "} \"\\\"\"");
}

absl::StatusOr<std::string> JsonSchemaCompiler::ArrayBody(const Json& s, const std::string& path,
                                                          const std::string& name) {
  std::string item = "json-value";
  if (auto it = s.find("items"); it != s.end()) {
    if (it->is_array()) return Fail(path, "items as an array (tuple validation) is not supported");
    auto r = Visit(*it, PathJoin(path, "items"), absl::StrCat(name, "-item"));
    if (!r.ok()) return r.status();
    item = *r;
  }
  int64_t min = 0, max = -1;
  for (const char* k : {"minItems", "maxItems"}) {
    auto it = s.find(k);
    if (it == s.end()) continue;
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 4096) {
      return Fail(path, absl::StrCat(k, " must be an integer in [0, 4096]"));
    }
    (std::string(k) == "minItems" ? min : max) = it->get<int64_t>();
  }
  if (max >= 0 && max < min) return Fail(path, "maxItems is below minItems");
  if (max == 0) return std::string(R"("[" ws "]")");
  const std::string rest_min = absl::StrCat(std::max<int64_t>(min - 1, 0));
  const std::string rest_max = max < 0 ? "" : absl::StrCat(max - 1);
  std::string rest;
  if (max < 0 && min <= 1) {
    rest = "*";
  } else if (max == 1) {
    rest = "";
  } else {
    rest = absl::StrCat("{", rest_min, ",", rest_max, "}");
  }
  std::string list = absl::StrCat(item, " ws");
  if (max != 1) absl::StrAppend(&list, " ( \",\" ws ", item, " ws )", rest);
  if (min == 0) return absl::StrCat("\"[\" ws ( ", list, " )? \"]\"");
  return absl::StrCat("\"[\" ws ", list, " \"]\"");
}

absl::StatusOr<std::string> JsonSchemaCompiler::ObjectBody(const Json& s, const std::string& path,
                                                           const std::string& name) {
  struct Prop {
    std::string key;
    std::string rule;
    bool required;
  };
  std::vector<Prop> props;
  absl::flat_hash_set<std::string> required;
  if (auto it = s.find("required"); it != s.end()) {
    if (!it->is_array()) return Fail(path, "required must be an array of strings");
    for (const Json& r : *it) {
      if (!r.is_string()) return Fail(path, "required must be an array of strings");
      required.insert(r.get<std::string>());
    }
  }
  absl::flat_hash_set<std::string> listed;
  if (auto it = s.find("properties"); it != s.end()) {
    if (!it->is_object()) return Fail(path, "properties must be an object");
    for (const auto& [k, v] : it->items()) {
      auto r = Visit(v, PathJoin(path, absl::StrCat("properties/", k)), absl::StrCat(name, "-", k));
      if (!r.ok()) return r.status();
      props.push_back({k, *r, required.contains(k)});
      listed.insert(k);
    }
  }
  // A required name without a schema in `properties`: any value.
  if (auto it = s.find("required"); it != s.end()) {
    for (const Json& r : *it) {
      if (!listed.contains(r.get<std::string>())) {
        props.push_back({r.get<std::string>(), "json-value", true});
        listed.insert(r.get<std::string>());
      }
    }
  }
  const Json* additional = nullptr;
  if (auto it = s.find("additionalProperties"); it != s.end()) {
    if (!it->is_boolean() && !it->is_object()) {
      return Fail(path, "additionalProperties must be a boolean or a schema");
    }
    additional = &*it;
  }
  if (props.empty()) {
    if (additional != nullptr && additional->is_boolean() && !additional->get<bool>()) {
      return std::string(R"("{" ws "}")");
    }
    if (additional == nullptr || additional->is_boolean()) return std::string("json-object");
    auto v = Visit(*additional, PathJoin(path, "additionalProperties"), absl::StrCat(name, "-value"));
    if (!v.ok()) return v.status();
    const std::string kv = absl::StrCat("json-string ws \":\" ws ", *v, " ws");
    return absl::StrCat("\"{\" ws ( ", kv, " ( \",\" ws ", kv, " )* )? \"}\"");
  }
  auto kv = [](const Prop& p) {
    return absl::StrCat(GrammarLiteral(nlohmann::json(p.key).dump()), " ws \":\" ws ", p.rule, " ws");
  };
  bool any_optional = false;
  for (const Prop& p : props) any_optional = any_optional || !p.required;
  if (!any_optional) {
    std::vector<std::string> parts;
    for (const Prop& p : props) parts.push_back(kv(p));
    return absl::StrCat("\"{\" ws ", absl::StrJoin(parts, " \",\" ws "), " \"}\"");
  }
  // rest(i, first): properties i.. given whether one was written before.
  const size_t n = props.size();
  std::vector<std::array<std::string, 2>> rest(n + 1);  // [i][first]
  for (size_t i = n; i-- > 0;) {
    for (int first = 0; first < 2; ++first) {
      const std::string sep = first ? "" : "\",\" ws ";
      const std::string after = i + 1 < n ? rest[i + 1][0] : "";
      std::string body = absl::StrCat(sep, kv(props[i]), after.empty() ? "" : " ", after);
      if (!props[i].required) {
        const std::string skip = i + 1 < n ? rest[i + 1][first] : "";
        body = absl::StrCat("( ", body, " )", skip.empty() ? "?" : absl::StrCat(" | ", skip));
        if (!skip.empty()) body = absl::StrCat("( ", body, " )");
      }
      const std::string rule = NewName(absl::StrCat(name, "-rest", i, first ? "f" : "n"));
      AddRule(rule, body);
      rest[i][first] = rule;
    }
  }
  return absl::StrCat("\"{\" ws ", rest[0][1], " \"}\"");
}

}  // namespace sluice
