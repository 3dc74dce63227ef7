#pragma once

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace strata {

// Note [Strata's environment variables]
// Every STRATA_* variable follows one rule. Set to the empty string, it counts as unset. A keyword ignores case
// (STRATA_SYNC_DEBUG=ERROR is error); a switch takes 1, true, yes, on or 0, false, no, off. Anything else is an
// InvalidArgumentError naming the variable, its value and what it accepts -- never a silent default. The variables
// that tune the runtime (STRATA_CPU_DEVICES, STRATA_MEMORY_LIMIT, STRATA_SYNC_DEBUG, STRATA_LAUNCH_BLOCKING) are
// checked together at the first allocation on a CPU device, which every program makes before long, so a typo in
// one that a CPU-only run never consults is reported too; until it is fixed, every CPU allocation fails with the
// same error. A STRATA_MEMORY_LIMIT entry for a device that does not exist (cpu:3 with one CPU device) is an error
// when that type's first allocator is created.

/// Whether `a` and `b` are the same ASCII text ignoring case: how keywords and units in variables compare.
bool same_ignoring_case(std::string_view a, std::string_view b);

/// The value of the environment variable `name`; std::nullopt when it is unset or empty.
std::optional<std::string> environment_value(const char* name);

/// The index in `keywords` of `value`, compared ignoring case; throws InvalidArgumentError naming the variable
/// `name`, the value and the keywords when it is none of them.
std::size_t environment_keyword(const char* name, std::string_view value,
                                std::initializer_list<std::string_view> keywords);

/// A switch: true for 1, true, yes, on; false for 0, false, no, off (ignoring case); anything else throws.
bool environment_switch(const char* name, std::string_view value);

/// Reads and checks every variable of the runtime (see the note); throws InvalidArgumentError for the first bad one.
void check_environment();

}  // namespace strata
