#include "strata/jit/source.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <optional>

#include "strata/core/error.h"

namespace strata::jit {

namespace {

constexpr std::size_t kMaxSource = 16u << 20;
constexpr int kMaxDepth = 10000;

struct Token {
  enum Kind { Identifier, Literal, Number, Punct } kind;
  std::string_view text;
  std::size_t offset;
  int line;
};

bool identifier_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_'; }
bool identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

/// Splits the source into tokens, skipping comments and preprocessor lines. Unterminated comments and literals end
/// at the end of the text: the compiler reports them.
std::vector<Token> tokenize(std::string_view s) {
  std::vector<Token> tokens;
  int line = 1;
  bool line_start = true;  // only whitespace since the last newline: a '#' here starts a directive
  std::size_t i = 0;
  const std::size_t n = s.size();
  while (i < n) {
    const char c = s[i];
    if (c == '\n') {
      ++line;
      line_start = true;
      ++i;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c)) != 0) {
      ++i;
      continue;
    }
    if (c == '/' && i + 1 < n && s[i + 1] == '/') {
      while (i < n && s[i] != '\n') ++i;
      continue;
    }
    if (c == '/' && i + 1 < n && s[i + 1] == '*') {
      i += 2;
      while (i < n && !(s[i] == '*' && i + 1 < n && s[i + 1] == '/')) line += s[i++] == '\n' ? 1 : 0;
      i = std::min(n, i + 2);
      continue;
    }
    if (c == '#' && line_start) {  // a directive, with its continuation lines
      while (i < n && s[i] != '\n') {
        if (s[i] == '\\' && i + 1 < n && s[i + 1] == '\n') {
          ++line;
          ++i;
        }
        ++i;
      }
      continue;
    }
    line_start = false;
    const std::size_t begin = i;
    if (c == '"' || c == '\'') {
      ++i;
      while (i < n && s[i] != c && s[i] != '\n') i += s[i] == '\\' ? 2 : 1;
      i = std::min(n, i + 1);
      tokens.push_back({Token::Literal, s.substr(begin, i - begin), begin, line});
    } else if (identifier_start(c)) {
      while (i < n && identifier_char(s[i])) ++i;
      tokens.push_back({Token::Identifier, s.substr(begin, i - begin), begin, line});
    } else if (std::isdigit(static_cast<unsigned char>(c)) != 0) {
      while (i < n && (identifier_char(s[i]) || s[i] == '.')) ++i;
      tokens.push_back({Token::Number, s.substr(begin, i - begin), begin, line});
    } else {
      tokens.push_back({Token::Punct, s.substr(begin, 1), begin, line});
      ++i;
    }
  }
  return tokens;
}

bool is(const Token& t, std::string_view text) { return t.text == text; }

/// The index of the bracket that closes the one at `open`, or tokens.size() when it is never closed.
std::size_t matching(const std::vector<Token>& tokens, std::size_t open) {
  const std::string_view o = tokens[open].text;
  const std::string_view c = o == "(" ? ")" : o == "{" ? "}" : o == "[" ? "]" : ">";
  int depth = 0;
  for (std::size_t i = open; i < tokens.size(); ++i) {
    if (tokens[i].kind != Token::Punct) continue;
    if (tokens[i].text == o) {
      STRATA_CHECK(++depth <= kMaxDepth, InvalidArgumentError,
                   "jit: the kernel source nests brackets deeper than {} (line {})", kMaxDepth, tokens[i].line);
    } else if (tokens[i].text == c && --depth == 0) {
      return i;
    }
  }
  return tokens.size();
}

struct CType {
  DType dtype;
  int bits;
  bool is_unsigned;
};

/// The C type that the words of a declaration name (`unsigned long long`, `std::int64_t`), if a launch can pass it.
std::optional<CType> c_type(const std::vector<std::string_view>& words) {
  std::string joined;
  for (std::string_view w : words) {
    if (w == "std" || w == "signed") continue;
    if (!joined.empty()) joined += ' ';
    joined += w;
  }
  static const std::pair<const char*, CType> kTypes[] = {
      {"float", {DType::F32, 32, false}},
      {"double", {DType::F64, 64, false}},
      {"int", {DType::I32, 32, false}},
      {"int32_t", {DType::I32, 32, false}},
      {"unsigned", {DType::I32, 32, true}},
      {"unsigned int", {DType::I32, 32, true}},
      {"uint32_t", {DType::I32, 32, true}},
      {"long", {DType::I64, 64, false}},
      {"long int", {DType::I64, 64, false}},
      {"long long", {DType::I64, 64, false}},
      {"long long int", {DType::I64, 64, false}},
      {"int64_t", {DType::I64, 64, false}},
      {"ptrdiff_t", {DType::I64, 64, false}},
      {"unsigned long", {DType::I64, 64, true}},
      {"unsigned long long", {DType::I64, 64, true}},
      {"unsigned long long int", {DType::I64, 64, true}},
      {"uint64_t", {DType::I64, 64, true}},
      {"size_t", {DType::I64, 64, true}},
      {"unsigned char", {DType::U8, 8, true}},
      {"uint8_t", {DType::U8, 8, true}},
      {"bool", {DType::Bool, 8, false}},
      {"half", {DType::F16, 16, false}},
      {"__half", {DType::F16, 16, false}},
      {"__nv_bfloat16", {DType::BF16, 16, false}},
      {"hip_bfloat16", {DType::BF16, 16, false}},
  };
  for (const auto& [name, type] : kTypes) {
    if (joined == name) return type;
  }
  return std::nullopt;
}

bool type_word(std::string_view w) {
  static constexpr std::string_view kWords[] = {"float", "double", "int",  "unsigned", "signed", "long",  "short",
                                                "char",  "bool",   "void", "size_t",   "half",   "__half"};
  return std::find(std::begin(kWords), std::end(kWords), w) != std::end(kWords) || w.ends_with("_t");
}

KernelParam parse_param(const std::vector<Token>& tokens, std::size_t begin, std::size_t end, std::string_view source) {
  KernelParam p;
  if (begin < end) {
    p.type = std::string(source.substr(tokens[begin].offset,
                                       tokens[end - 1].offset + tokens[end - 1].text.size() - tokens[begin].offset));
  }
  std::vector<std::string_view> words;
  int stars = 0;
  bool const_before_star = false, unsupported = false;
  for (std::size_t i = begin; i < end; ++i) {
    const Token& t = tokens[i];
    if (t.kind == Token::Identifier) {
      if (t.text == "const") {
        if (stars == 0) const_before_star = true;
      } else if (t.text != "__restrict__" && t.text != "__restrict" && t.text != "restrict" && t.text != "volatile") {
        words.push_back(t.text);
      }
    } else if (is(t, "*")) {
      ++stars;
    } else if (!is(t, ":")) {  // `std::int64_t`; anything else (&, [, =, <) is not a type a launch passes
      unsupported = true;
    }
  }
  if (words.size() >= 2 && !type_word(words.back())) {
    p.name = std::string(words.back());
    words.pop_back();
  } else if (words.size() == 1 && stars == 0 && !type_word(words.back()) && !c_type(words)) {
    unsupported = true;  // a user type, or a name without a type
  }
  if (!p.name.empty() && p.type.size() >= p.name.size()) p.type.resize(p.type.size() - p.name.size());
  while (!p.type.empty() && std::isspace(static_cast<unsigned char>(p.type.back())) != 0) p.type.pop_back();
  p.pointer = stars == 1;
  p.is_const = p.pointer && const_before_star;
  if (const auto type = c_type(words); type && !unsupported && stars <= 1) {
    p.supported = true;
    p.dtype = type->dtype;
    p.bits = type->bits;
    p.is_unsigned = type->is_unsigned;
  }
  return p;
}

}  // namespace

SourceInfo scan_source(std::string_view source) {
  STRATA_CHECK(source.size() <= kMaxSource, InvalidArgumentError, "jit: the kernel source is {} bytes; at most {}",
               source.size(), kMaxSource);
  const std::vector<Token> tokens = tokenize(source);
  SourceInfo info;
  // Token ranges of __global__ bodies, and of every function body (for the scope of extern __shared__).
  std::vector<std::pair<std::size_t, std::size_t>> kernel_bodies;
  std::vector<std::pair<std::size_t, std::size_t>> function_bodies;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (is(tokens[i], "{") && i > 0 && is(tokens[i - 1], ")")) {
      function_bodies.emplace_back(i, matching(tokens, i));
    }
    if (!is(tokens[i], "__global__")) continue;
    KernelDecl k;
    std::size_t head = i;
    if (head >= 2 && is(tokens[head - 2], "extern") && is(tokens[head - 1], "\"C\"")) head -= 2;
    k.is_template = head > 0 && is(tokens[head - 1], ">");
    k.head_begin = tokens[head].offset;
    std::size_t j = i + 1;
    while (j < tokens.size() && (is(tokens[j], "__launch_bounds__") || is(tokens[j], "static") ||
                                 is(tokens[j], "inline") || is(tokens[j], "__forceinline__"))) {
      j = is(tokens[j], "__launch_bounds__") && j + 1 < tokens.size() && is(tokens[j + 1], "(")
              ? matching(tokens, j + 1) + 1
              : j + 1;
    }
    if (j >= tokens.size() || !is(tokens[j], "void")) continue;  // not a kernel we understand: the compiler says
    k.head_end = tokens[j].offset + tokens[j].text.size();
    ++j;
    if (j >= tokens.size() || tokens[j].kind != Token::Identifier) continue;
    k.name = std::string(tokens[j].text);
    k.line = tokens[j].line;
    ++j;
    if (j >= tokens.size() || !is(tokens[j], "(")) continue;
    const std::size_t close = matching(tokens, j);
    if (close >= tokens.size()) continue;
    k.params_begin = tokens[j].offset + 1;
    k.params_end = tokens[close].offset;
    int depth = 0;
    std::size_t start = j + 1;
    for (std::size_t t = j + 1; t <= close; ++t) {
      const std::string_view x = tokens[t].text;
      if (tokens[t].kind == Token::Punct && (x == "(" || x == "<" || x == "[")) ++depth;
      if (tokens[t].kind == Token::Punct && (x == ")" || x == ">" || x == "]") && t != close) --depth;
      if ((t == close || (depth == 0 && is(tokens[t], ","))) && t > start) {
        k.params.push_back(parse_param(tokens, start, t, source));
        start = t + 1;
      } else if (t == close || (depth == 0 && is(tokens[t], ","))) {
        start = t + 1;
      }
    }
    if (k.params.size() == 1 && k.params[0].name.empty() && k.params[0].type == "void") k.params.clear();
    std::size_t body = close + 1;
    while (body < tokens.size() && is(tokens[body], "__launch_bounds__") && body + 1 < tokens.size()) {
      body = matching(tokens, body + 1) + 1;
    }
    if (body < tokens.size() && is(tokens[body], "{")) {
      const std::size_t end = matching(tokens, body);
      kernel_bodies.emplace_back(body, end);
      function_bodies.emplace_back(body, end);
      for (std::size_t t = body; t < end && t < tokens.size(); ++t) {
        if (is(tokens[t], "__syncthreads")) k.uses_barrier = true;
      }
    }
    info.kernels.push_back(std::move(k));
  }
  // A declaration and the definition of one kernel are rewritten alike: the definition decides.
  for (KernelDecl& k : info.kernels) {
    for (const KernelDecl& other : info.kernels) {
      if (other.name == k.name && other.uses_barrier) k.uses_barrier = true;
    }
  }
  const auto inside = [](const std::vector<std::pair<std::size_t, std::size_t>>& ranges, std::size_t t) {
    return std::any_of(ranges.begin(), ranges.end(), [t](const auto& r) { return t > r.first && t < r.second; });
  };
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (is(tokens[i], "__syncthreads") && !inside(kernel_bodies, i)) {
      info.barriers_outside_kernels.push_back(tokens[i].line);
    }
    if ((is(tokens[i], "threadIdx") || is(tokens[i], "blockIdx") || is(tokens[i], "blockDim") ||
         is(tokens[i], "gridDim")) &&
        !inside(kernel_bodies, i)) {
      info.index_outside_kernels = true;
    }
    if (!(is(tokens[i], "extern") && i + 1 < tokens.size() && is(tokens[i + 1], "__shared__"))) continue;
    // extern __shared__ [__align__(n)] T name[];
    std::size_t j = i + 2;
    std::vector<std::string_view> type;
    std::string_view name;
    while (j < tokens.size() && !is(tokens[j], "[") && !is(tokens[j], ";")) {
      if (is(tokens[j], "__align__") && j + 1 < tokens.size() && is(tokens[j + 1], "(")) {
        j = matching(tokens, j + 1) + 1;
        continue;
      }
      if (!name.empty()) type.push_back(name);
      name = tokens[j].text;
      ++j;
    }
    if (name.empty() || type.empty() || j + 2 >= tokens.size() || !is(tokens[j], "[") || !is(tokens[j + 1], "]") ||
        !is(tokens[j + 2], ";")) {
      continue;  // not the form we rewrite: the compiler reports what is wrong with it
    }
    SourceInfo::DynamicShared d;
    d.begin = tokens[i].offset;
    d.end = tokens[j + 2].offset + 1;
    for (std::string_view w : type) {
      if (!d.type.empty()) d.type += ' ';
      d.type += w;
    }
    d.name = std::string(name);
    d.file_scope = !inside(function_bodies, i);
    info.dynamic_shared.push_back(std::move(d));
  }
  return info;
}

const KernelDecl& find_kernel(const SourceInfo& info, std::string_view name) {
  std::vector<std::string> names;
  for (const KernelDecl& k : info.kernels) {
    if (k.name == name && !k.is_template) return k;
    if (!k.is_template && std::find(names.begin(), names.end(), k.name) == names.end()) names.push_back(k.name);
  }
  STRATA_THROW(InvalidArgumentError, "jit: no __global__ function '{}' in the source; {}", name,
               names.empty() ? std::string("it defines none (a kernel is `extern \"C\" __global__ void name(...)`)")
                             : fmt::format("it defines: {}", fmt::join(names, ", ")));
}

std::string rewrite_for_cpu(std::string_view source, const SourceInfo& info) {
  struct Edit {
    std::size_t begin, end;
    std::string text;
  };
  std::vector<Edit> edits;
  constexpr std::string_view kIndex = "const ::strata::jit::cpu::ThreadState& __strata_idx";
  for (const KernelDecl& k : info.kernels) {
    if (k.head_end <= k.head_begin || k.params_end < k.params_begin || k.params_begin <= k.head_end) continue;
    if (k.uses_barrier) {
      edits.push_back({k.head_begin, k.head_end, "static ::strata::kernels::BlockThread"});
      continue;
    }
    edits.push_back({k.head_begin, k.head_end, "static inline __attribute__((always_inline)) void"});
    std::string_view inside = source.substr(k.params_begin, k.params_end - k.params_begin);
    while (!inside.empty() && std::isspace(static_cast<unsigned char>(inside.front())) != 0) inside.remove_prefix(1);
    while (!inside.empty() && std::isspace(static_cast<unsigned char>(inside.back())) != 0) inside.remove_suffix(1);
    if (inside.empty() || inside == "void") {
      edits.push_back({k.params_begin, k.params_end, std::string(kIndex)});
    } else {
      edits.push_back({k.params_begin, k.params_begin, std::string(kIndex) + ", "});
    }
  }
  for (const SourceInfo::DynamicShared& d : info.dynamic_shared) {
    const std::string pointer = fmt::format("(reinterpret_cast<{}*>(__strata_idx.dynamic_shared))", d.type);
    // At file scope a macro, read where it is used; in a function a pointer, which keeps the name's scope.
    edits.push_back({d.begin, d.end,
                     d.file_scope ? fmt::format("\n#define {} {}\n", d.name, pointer)
                                  : fmt::format("{}* const {} = {};", d.type, d.name, pointer)});
  }
  std::sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) { return a.begin < b.begin; });
  std::string out;
  out.reserve(source.size() + 64 * edits.size());
  std::size_t at = 0;
  for (const Edit& e : edits) {
    if (e.begin < at) continue;  // overlapping spans come only from malformed text; the compiler reports it
    out.append(source.substr(at, e.begin - at));
    std::string text = e.text;
    if (text.starts_with('\n')) {
      // A directive needs a line of its own; the line count stays as it was with a #line after it.
      const int line =
          1 + static_cast<int>(std::count(source.begin(), source.begin() + static_cast<long>(e.begin), '\n'));
      text += fmt::format("#line {}\n", line);
    }
    out += text;
    at = e.end;
  }
  out.append(source.substr(at));
  return out;
}

}  // namespace strata::jit
