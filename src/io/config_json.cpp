#include "io/config_json.h"

#include "core/error.h"

namespace vidax {

nlohmann::json parse_config_object(const std::string& text, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw_input_error(source, ": invalid JSON: ", e.what());
  }
  if (!j.is_object()) throw_input_error(source, ": expected a JSON object");
  return j;
}

int64_t config_int(const nlohmann::json& j, std::initializer_list<const char*> keys,
                   int64_t fallback, const std::string& source) {
  for (const char* key : keys) {
    if (!j.contains(key) || j[key].is_null()) continue;
    if (!j[key].is_number_integer())
      throw_input_error(source, ": config key '", key, "' must be an integer, got ", j[key].dump());
    return j[key].get<int64_t>();
  }
  return fallback;
}

double config_number(const nlohmann::json& j, std::initializer_list<const char*> keys,
                     double fallback, const std::string& source) {
  for (const char* key : keys) {
    if (!j.contains(key) || j[key].is_null()) continue;
    if (!j[key].is_number())
      throw_input_error(source, ": config key '", key, "' must be a number, got ", j[key].dump());
    return j[key].get<double>();
  }
  return fallback;
}

}  // namespace vidax
