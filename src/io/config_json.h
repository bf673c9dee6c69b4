// Reading model config files (official constructor kwargs, diffusers / transformers config.json):
// parsing with an error naming the file, and typed lookups over alternative key names whose
// errors name the file and the key. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include <nlohmann/json.hpp>

namespace vidax {

// Parses `text` as a JSON object; InputError naming `source` otherwise.
nlohmann::json parse_config_object(const std::string& text, const std::string& source);

// The first of `keys` present and not null, else `fallback`. InputError naming `source` and the
// key when the value has the wrong type.
int64_t config_int(const nlohmann::json& j, std::initializer_list<const char*> keys,
                   int64_t fallback, const std::string& source);
double config_number(const nlohmann::json& j, std::initializer_list<const char*> keys,
                     double fallback, const std::string& source);

}  // namespace vidax
