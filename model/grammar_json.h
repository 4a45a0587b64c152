// JSON in the grammar format (model/grammar.h): any JSON value or object,
// and JSON Schema compiled to a grammar, for structured outputs and tool
// calls.
//
// Supported JSON Schema (docs/API.md, "Structured outputs"): type (one or a
// list) string / number / integer / boolean / null / object / array;
// properties, required, additionalProperties (true, false or absent: no
// property beyond `properties` is generated, which every one of them
// allows; a schema with no `properties`: a map to that schema); items,
// minItems, maxItems; minLength, maxLength; enum, const; anyOf; allOf with
// one schema; $ref to "#", "#/$defs/..." or "#/definitions/..." (recursion
// allowed); format date, time, date-time, uuid; integer minimum 0 or 1 and bounds
// as wide as 15 digits (zod's .int()). Annotations (title,
// description, default, examples, $schema, $id, $comment, deprecated,
// readOnly, writeOnly) are ignored. Every other keyword is refused with
// InvalidArgument "json_schema: keyword 'K' at #/path is not supported",
// rather than ignored: output that ignores a constraint would not validate.
//
// Properties are generated in the schema's order, every required one and
// any subset of the optional ones. Numbers have at most 16 integer, 16
// fraction and 2 exponent digits (so that every one fits a double); white space between tokens is at most a newline and 20
// spaces or tabs, so that the output of even a random model ends.
//
// Thread-safety: free functions and a single-use class.
#ifndef SLUICE_MODEL_GRAMMAR_JSON_H_
#define SLUICE_MODEL_GRAMMAR_JSON_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace sluice {

// `root ::= json-value` (object_only: json-object) with its rules.
std::string JsonGrammar(bool object_only);

// The grammar of the instances of `schema` (JSON text).
absl::StatusOr<std::string> JsonSchemaToGrammar(std::string_view schema);

// Several schemas in one grammar (tool calls: one rule per tool's
// parameters). Add() returns the rule to reference; Grammar() has every
// rule given with AddRule and the JSON rules, without `root` unless added.
class JsonSchemaCompiler {
 public:
  JsonSchemaCompiler();
  // `what` names the schema in errors (e.g. "tools[1].function.parameters").
  absl::StatusOr<std::string> Add(std::string_view schema_json, std::string_view name_hint,
                                  std::string_view what);
  absl::StatusOr<std::string> AddParsed(const nlohmann::ordered_json& schema,
                                  std::string_view name_hint, std::string_view what);
  void AddRule(const std::string& name, const std::string& body);
  std::string Grammar() const;

 private:
  using Json = nlohmann::ordered_json;
  absl::StatusOr<std::string> Visit(const Json& s, const std::string& path, const std::string& name);
  absl::StatusOr<std::string> Body(const Json& s, const std::string& path, const std::string& name);
  absl::StatusOr<std::string> ObjectBody(const Json& s, const std::string& path,
                                         const std::string& name);
  absl::StatusOr<std::string> ArrayBody(const Json& s, const std::string& path,
                                        const std::string& name);
  absl::StatusOr<std::string> StringBody(const Json& s, const std::string& path);
  absl::StatusOr<std::string> IntegerBody(const Json& s, const std::string& path);
  absl::StatusOr<std::string> Ref(const std::string& ref, const std::string& path);
  absl::Status Fail(const std::string& path, const std::string& what) const;
  std::string NewName(const std::string& hint);

  const Json* doc_ = nullptr;  // the schema being added ($ref roots)
  std::string doc_rule_;
  std::string what_;
  std::vector<std::pair<std::string, std::string>> rules_;
  absl::flat_hash_set<std::string> names_;
  absl::flat_hash_map<std::string, std::string> refs_;
  int depth_ = 0;
};

// A JSON value as a grammar literal, e.g. "\"a\\\"b\"".
std::string GrammarLiteral(std::string_view bytes);

}  // namespace sluice

#endif  // SLUICE_MODEL_GRAMMAR_JSON_H_
