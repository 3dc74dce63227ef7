#pragma once

// What strata-train's tasks share about checkpoints: claiming the file before training, reading the metadata back,
// and comparing a resumed run's settings with the checkpoint's (Note [Resume checks the settings] in trainer.cpp).

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <set>
#include <string>

#include "strata/io/file.h"
#include "strata/io/safetensors.h"
#include "strata/tensor/random.h"

namespace strata::train {

/// Checks that `path` can be written and takes its lock (Note [The checkpoint path is checked before training],
/// Note [One run per checkpoint]): an existing checkpoint is refused unless the run resumes from it.
std::unique_ptr<io::FileLock> claim_checkpoint(const std::filesystem::path& path, bool resume);

/// Whether the checkpoint exists; IOError when it cannot be looked up.
bool checkpoint_exists(const std::filesystem::path& path);

/// The metadata value `key` of checkpoint `path`; IOError saying the file is not a strata-train checkpoint when
/// it is missing.
std::string metadata_value(const std::filesystem::path& path, const io::Metadata& metadata, const char* key);

/// A count from a checkpoint's metadata, or IOError naming the key and the text.
int64_t parse_count(const std::filesystem::path& path, const char* key, const std::string& text);

/// A generator's state as the metadata keeps it ("seed offset"), and back (IOError naming the text).
std::string generator_text(const GeneratorState& state);
GeneratorState parse_generator(const std::filesystem::path& path, const std::string& text);

/// The keys of `ours` whose values differ from the checkpoint's `saved`. Throws when one is missing from `saved`
/// (not a checkpoint of this task), when a key of `fixed` changed (it can never change on resume: `why` says
/// what would not fit), or when anything changed and `accept_changes` is false (listing the differences).
std::set<std::string> changed_settings(const std::filesystem::path& path, const io::Metadata& saved,
                                       const io::Metadata& ours, bool accept_changes,
                                       std::initializer_list<const char*> fixed, const char* why);

/// splitmix64's finaliser of a mix of the three: unrelated values for neighbouring arguments. What decides a
/// batch's augmentation and a language model's batch offsets, so that a run resumed at any step draws what an
/// uninterrupted one would.
uint64_t mix_seed(uint64_t seed, uint64_t a, uint64_t b);

}  // namespace strata::train
