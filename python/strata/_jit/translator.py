"""Python function -> CUDA-dialect source, for strata.RawKernel.

The translator reads the function's source (inspect.getsource), parses it with ast and writes one C++ function per
Python function (the kernel, and each @strata.jit(device=True) function it calls, once per argument types). Every
statement is preceded by `#line <python line> "<python file>"`, so that the C++ compiler's errors and a failed
device-side assert (an index out of bounds, a Python `assert`) name the user's file and line.

Types: see types.py. Locals are declared at the top of the C++ function with the promotion of everything assigned
to them; the body is walked until those types stop changing, then once more to write the source.

An array argument `a` becomes a pointer `a` and hidden parameters `a_shape0`, `a_shape1`, ... (long long): arrays
are contiguous (RawKernel requires it), so `c[i, j]` is `c[i * c_shape1 + j]`, each index checked against its
extent by an assert unless boundscheck=False. Negative indices are out of bounds (no wrap-around)."""

import ast
import builtins
import inspect
import math
import textwrap

from strata._jit import intrinsics as _in
from strata._jit.types import C_TYPES, ArrayType, dtype_name, is_int, promote, unify

CPP_RESERVED = set("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t class compl
concept const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype default delete do
double dynamic_cast else enum explicit export extern false float for friend goto if inline int long mutable namespace
new noexcept not not_eq nullptr operator or or_eq private protected public register reinterpret_cast requires return
short signed sizeof static static_assert static_cast struct switch template this thread_local throw true try typedef
typeid typename union unsigned using virtual void volatile wchar_t while xor xor_eq main assert min max abs
threadIdx blockIdx blockDim gridDim dim3 uint3 printf std strata atomicAdd atomicSub atomicMax atomicMin atomicExch
atomicCAS NAN INFINITY
""".split())

# math's functions: name -> (C name, number of arguments, result kind). Result kinds: "float" (the float type of the
# argument: f32 stays f32, integers become f64), "int" (Python returns an int: floor, ceil, trunc), "bool".
MATH = {
    "sqrt": ("sqrt", 1, "float"), "exp": ("exp", 1, "float"), "expm1": ("expm1", 1, "float"),
    "log": ("log", 1, "float"), "log2": ("log2", 1, "float"), "log10": ("log10", 1, "float"),
    "log1p": ("log1p", 1, "float"), "sin": ("sin", 1, "float"), "cos": ("cos", 1, "float"),
    "tan": ("tan", 1, "float"), "asin": ("asin", 1, "float"), "acos": ("acos", 1, "float"),
    "atan": ("atan", 1, "float"), "sinh": ("sinh", 1, "float"), "cosh": ("cosh", 1, "float"),
    "tanh": ("tanh", 1, "float"), "asinh": ("asinh", 1, "float"), "acosh": ("acosh", 1, "float"),
    "atanh": ("atanh", 1, "float"), "erf": ("erf", 1, "float"), "erfc": ("erfc", 1, "float"),
    "gamma": ("tgamma", 1, "float"), "lgamma": ("lgamma", 1, "float"), "fabs": ("fabs", 1, "float"),
    "atan2": ("atan2", 2, "float"), "pow": ("pow", 2, "float"), "hypot": ("hypot", 2, "float"),
    "fmod": ("fmod", 2, "float"), "copysign": ("copysign", 2, "float"),
    "floor": ("floor", 1, "int"), "ceil": ("ceil", 1, "int"), "trunc": ("trunc", 1, "int"),
    "isnan": ("isnan", 1, "bool"), "isinf": ("isinf", 1, "bool"), "isfinite": ("isfinite", 1, "bool"),
}
C_FUNCTIONS = {c for c, _, _ in MATH.values()} | {"rint", "floorf", "errno", "stdin", "stdout", "stderr"}
MATH_CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau, "inf": math.inf, "nan": math.nan}

# Python's floor division and modulo on integers and floats (C truncates), and integer powers. An integer division
# by zero gives 0 (C's is undefined and kills the process on x86), as NumPy's does.
PRELUDE = r"""
template <typename T> __device__ inline T pyj_floordiv(T a, T b) {
  if (b == 0) return 0;
  T q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}
template <typename T> __device__ inline T pyj_mod(T a, T b) {
  if (b == 0) return 0;
  T r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
template <typename T> __device__ inline T pyj_ffloordiv(T a, T b) { return floor(a / b); }
template <typename T> __device__ inline T pyj_fmod(T a, T b) {
  T r = fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
template <typename T> __device__ inline T pyj_ipow(T a, T b) {
  T r = 1;
  for (; b > 0; b >>= 1, a *= a) if (b & 1) r *= a;
  return r;
}
template <typename T> __device__ inline T pyj_abs(T a) { return a < 0 ? -a : a; }
template <typename T> __device__ inline T pyj_min(T a, T b) { return b < a ? b : a; }
template <typename T> __device__ inline T pyj_max(T a, T b) { return a < b ? b : a; }
"""


class TranslationError(Exception):
    """Raised with a line of the user's source; decorator.py turns it into strata.CompileError."""

    def __init__(self, message, line, info=None):
        super().__init__(message)
        self.line = line
        self.info = info  # the FunctionInfo whose file the line is in (None: the kernel's)


class Val:
    """A translated expression: C++ text and its type (a scalar name, an ArrayType, or 'tuple' with `items`)."""

    def __init__(self, code, type_, items=None, shape=None, array=None, checked=None):
        self.code, self.type, self.items = code, type_, items
        self.shape = shape  # arrays: the C++ expressions of the extents
        self.array = array  # arrays: the name that the extents belong to (for error messages)
        self.checked = checked  # an element whose index is checked without ending the thread: (base, site, index)


class Module:
    """One compiled unit: the kernel and the device functions it calls, by (function, argument types)."""

    def __init__(self, device_kind):
        self.device_kind = device_kind
        self.functions = []  # C++ text, callees first
        self.specialisations = {}  # (python function, types) -> (C name, return type)
        self.stack = []  # functions being translated (recursion is not supported)


class FunctionInfo:
    """A Python function's parsed source, shared by all its translations."""

    def __init__(self, fn):
        self.fn = fn
        self.name = fn.__name__
        try:
            lines, self.first_line = inspect.getsourcelines(fn)
            self.file = inspect.getsourcefile(fn) or inspect.getfile(fn)
        except (OSError, TypeError) as e:
            raise TranslationError(f"strata.jit needs the source of '{fn.__name__}' ({e})", 0) from None
        self.source_lines = lines
        tree = ast.parse(textwrap.dedent("".join(lines)))
        self.node = tree.body[0]
        if not isinstance(self.node, ast.FunctionDef):
            raise TranslationError(f"strata.jit compiles functions defined with def, not {type(self.node).__name__}",
                                   self.first_line, self)
        self.args = [a.arg for a in self.node.args.args]
        a = self.node.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.posonlyargs:
            raise TranslationError(f"'{self.name}': default values, *args, **kwargs and keyword-only parameters are "
                                   "not supported", self.first_line, self)
        self.globals = fn.__globals__
        self.closure = {}
        if fn.__closure__:
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
                try:
                    self.closure[name] = cell.cell_contents
                except ValueError:
                    pass

    def line(self, node):
        return self.first_line + getattr(node, "lineno", 1) - 1

    def text(self, line):
        i = line - self.first_line
        return self.source_lines[i].strip() if 0 <= i < len(self.source_lines) else ""


_NOT_FOUND = object()


def c_literal(value):
    if isinstance(value, bool):
        return Val("true" if value else "false", "bool")
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise ValueError(f"the integer {value} does not fit in 64 bits")
        return Val(f"{value}LL" if value != -(2**63) else "(-9223372036854775807LL - 1)", "i64")
    if isinstance(value, float):
        if math.isnan(value):
            return Val("__builtin_nan(\"\")", "f64")
        if math.isinf(value):
            return Val("__builtin_huge_val()" if value > 0 else "(-__builtin_huge_val())", "f64")
        return Val(repr(value), "f64")
    return None


def _cast(val, t):
    if val.type == t:
        return val.code
    return f"(({C_TYPES[t]})({val.code}))"


class FunctionTranslator:
    """Translates one Python function for one list of argument types."""

    def __init__(self, info, arg_types, module, kernel, boundscheck, c_name):
        self.info, self.module, self.kernel, self.boundscheck = info, module, kernel, boundscheck
        self.arg_types = dict(zip(info.args, arg_types))
        self.c_name = c_name
        self.locals = {}  # name -> scalar type
        self.arrays = {}  # shared/local arrays: name -> (ArrayType, [extent ints], "shared"|"local"|"dynamic")
        self.return_type = None  # None: no value returned (void)
        self.final = False
        self.written = set()  # array arguments written through
        self.uses_barrier = False
        self.temp = 0
        # Side effects emitted so far (atomics, calls): an index with one is evaluated once (subscript).
        self.effects = 0
        # Loops or device calls seen; a kernel with neither always reaches its end, so on the CPU its indices are
        # checked without ending the thread (Note [Checked indices that vectorise] in jit/cpu_dialect.h).
        self.loops_or_calls = False
        self.straight_line = False  # set by translate_kernel from a first pass
        self.check_sites = []  # (line, text) of each checked_load / checked_store site, in Site order

    # ---- errors and names ----
    def error(self, node, message):
        raise TranslationError(message, self.info.line(node), self.info)

    def cname(self, name):
        # C++'s keywords, the functions the source calls (a local `sqrt` would hide sqrt()), and names in capitals,
        # which the headers' macros use (NULL, EOF, FLT_MAX), are renamed.
        if name in CPP_RESERVED or name in C_FUNCTIONS or name.startswith(("pyj_", "__")) or (
                len(name) > 1 and name.isupper()):
            return f"pyj_v_{name}"
        return name

    def arg_cname(self, name):
        # An argument assigned a wider type than it arrives with is copied into a local of that type.
        t = self.arg_types[name]
        if not isinstance(t, ArrayType) and name in self.locals and self.locals[name] != t:
            return f"pyj_arg_{name}"
        return self.cname(name)

    def new_temp(self):
        self.temp += 1
        return f"pyj_t{self.temp}"

    # ---- the whole function ----
    def translate(self):
        node = self.info.node
        for _ in range(30):
            before = (dict(self.locals), self.return_type)
            self.temp = 0
            self.check_sites = []
            self.block(node.body, 1)
            if (dict(self.locals), self.return_type) == before:
                break
        self.final = True
        self.temp = 0
        self.check_sites = []
        self.written = set()
        body = self.block(node.body, 1)
        return self.assemble(body)

    def assemble(self, body):
        info = self.info
        params = []
        for name in info.args:
            t = self.arg_types[name]
            c = self.cname(name)
            if isinstance(t, ArrayType):
                const = "" if (name in self.written or not self.kernel) else "const "
                params.append(f"{const}{C_TYPES[t.dtype]}* {c}")
                params += [f"long long {c}_shape{k}" for k in range(t.rank)]
            else:
                params.append(f"{C_TYPES[t]} {self.arg_cname(name)}")
        def_line = info.line(info.node)
        out = [f'#line {def_line} "{_escape(info.file)}"']
        if self.kernel:
            out.append(f'extern "C" __global__ void {self.c_name}({", ".join(params)}) {{')
        else:
            ret = "void" if self.return_type is None else C_TYPES[self.return_type]
            out.append(f"__device__ {ret} {self.c_name}({', '.join(params)}) {{")
        for name, t in self.locals.items():
            if name in self.arg_types:
                if not isinstance(self.arg_types[name], ArrayType) and self.arg_cname(name) != self.cname(name):
                    out.append(f"  {C_TYPES[t]} {self.cname(name)} = {self.arg_cname(name)};")
                continue
            out.append(f"  {C_TYPES[t]} {self.cname(name)} = 0;")
        for name, (t, extents, kind) in self.arrays.items():
            c = self.cname(name)
            if kind == "dynamic":
                out.append(f"  extern __shared__ {C_TYPES[t.dtype]} {c}[];")
            else:
                size = math.prod(extents)
                out.append(f"  {'__shared__ ' if kind == 'shared' else ''}{C_TYPES[t.dtype]} {c}[{size}];")
        out += body
        if not self.kernel and self.return_type is not None:
            out.append(f"  return ({C_TYPES[self.return_type]})0;")
        out.append("}")
        if self.check_sites:
            sites = ", ".join(f'{{{line}, "{text}"}}' for line, text in self.check_sites)
            out.append(f"STRATA_CHECK_SITES({self.c_name}, {sites})")
        return "\n".join(out)

    # ---- statements ----
    def block(self, stmts, depth):
        out = []
        for s in stmts:
            out += self.statement(s, depth)
        return out

    def line_directive(self, node):
        return f'#line {self.info.line(node)} "{_escape(self.info.file)}"'

    def statement(self, node, depth):
        pad = "  " * depth
        method = getattr(self, "stmt_" + type(node).__name__, None)
        if method is None:
            self.error(node, f"strata.jit does not support the statement '{_describe(node)}' ({type(node).__name__})")
        lines = method(node, depth)
        if not lines:
            return []
        # The statement's own code (all of it before a nested statement's #line) goes on one line, the directive's,
        # so that every assert in it reports the Python line (__LINE__).
        nested = next((k for k, ln in enumerate(lines) if ln.startswith("#line")), len(lines))
        lines = [" ".join(ln.strip() for ln in lines[:nested])] + lines[nested:]
        return [self.line_directive(node)] + [pad + ln if not ln.startswith("#line") else ln for ln in lines]

    def stmt_Pass(self, node, depth):
        return []

    def stmt_Expr(self, node, depth):
        if isinstance(node.value, ast.Constant):  # a docstring
            return []
        v = self.expr(node.value)
        return [f"{v.code};"]

    def stmt_Assign(self, node, depth):
        value = node.value
        # x = strata.shared.array(...): an array declared at the top of the function.
        if isinstance(value, ast.Call) and self.resolve(value.func) in (_in.shared.array, _in.local.array):
            if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
                self.error(node, "assign strata.shared.array / strata.local.array to one name")
            self.declare_array(node.targets[0].id, value)
            return []
        out = []
        if len(node.targets) > 1:
            t = self.new_temp()
            v = self.expr(value)
            if not isinstance(v.type, str) or v.type == "tuple":
                self.error(node, "chained assignment of a non-number")
            out.append(f"{C_TYPES[v.type]} {t} = {v.code};")
            v = Val(t, v.type)
            for target in node.targets:
                out += self.assign(target, v, node)
            return ["{"] + ["  " + ln for ln in out] + ["}"]
        return self.assign(node.targets[0], self.expr(value), node)

    def stmt_AnnAssign(self, node, depth):
        if node.value is None:
            return []
        return self.assign(node.target, self.expr(node.value), node)

    def assign(self, target, v, node):
        if isinstance(target, ast.Name):
            name = target.id
            if name in self.arrays or isinstance(self.arg_types.get(name), ArrayType):
                self.error(node, f"assigning to the array '{name}'")
            if v.type == "tuple" or isinstance(v.type, ArrayType):
                self.error(node, f"assigning {'a tuple' if v.type == 'tuple' else 'an array'} to '{name}' (a local "
                           "holds a number; unpack tuples as `a, b = ...`)")
            if not self.final:
                self.locals[name] = unify(self.locals.get(name, self.arg_types.get(name)), v.type)
                return [f"{name} = 0;"]
            t = self.locals[name]
            return [f"{self.cname(name)} = {_cast(v, t)};"]
        if isinstance(target, ast.Subscript):
            ref = self.subscript(target)
            if ref.type == "tuple" or isinstance(ref.type, ArrayType):
                self.error(node, "assigning to a part of a tuple or an array that is not one element")
            if v.type == "tuple" or isinstance(v.type, ArrayType):
                self.error(node, "assigning a tuple or an array to an array element")
            if ref.checked:
                # The value first, as Python evaluates it; a failed check skips the store.
                (base, site, index), value = ref.checked, self.new_temp()
                return ["{", f"  const {C_TYPES[ref.type]} {value} = {_cast(v, ref.type)};",
                        f"  ::strata::jit::cpu::checked_store<{site}>(__strata_idx, {base}, {value}, {index});", "}"]
            return [f"{ref.code} = {_cast(v, ref.type)};"]
        if isinstance(target, (ast.Tuple, ast.List)):
            if v.type != "tuple":
                self.error(node, "unpacking something that is not a tuple")
            if len(v.items) != len(target.elts):
                self.error(node, f"unpacking {len(v.items)} values into {len(target.elts)} names")
            out, temps = [], []
            for item in v.items:
                if not isinstance(item.type, str) or item.type == "tuple":
                    self.error(node, "unpacking a tuple of non-numbers")
                t = self.new_temp()
                out.append(f"{C_TYPES[item.type]} {t} = {item.code};")
                temps.append(Val(t, item.type))
            for tgt, tv in zip(target.elts, temps):
                out += self.assign(tgt, tv, node)
            return ["{"] + ["  " + ln for ln in out] + ["}"]
        self.error(node, f"assigning to {_describe(target)}")

    def stmt_AugAssign(self, node, depth):
        target = node.target
        if isinstance(target, ast.Name):
            current = self.expr(target)
            return self.assign(target, self.binop(current, node.op, self.expr(node.value), node), node)
        if isinstance(target, ast.Subscript):
            ref = self.subscript(target)
            if not isinstance(ref.type, str) or ref.type == "tuple":
                self.error(node, "augmented assignment to something that is not a number")
            t = self.new_temp()
            if ref.checked:
                # The index has no side effect (or it would be asserted), so the store may evaluate it again.
                base, site, index = ref.checked
                v = self.binop(Val(t, ref.type), node.op, self.expr(node.value), node)
                return ["{", f"  {C_TYPES[ref.type]} {t} = {ref.code};", f"  {t} = {_cast(v, ref.type)};",
                        f"  ::strata::jit::cpu::checked_store<{site}>(__strata_idx, {base}, {t}, {index});", "}"]
            v = self.binop(Val(t, ref.type), node.op, self.expr(node.value), node)
            return ["{", f"  {C_TYPES[ref.type]}& {t} = {ref.code};", f"  {t} = {_cast(v, ref.type)};", "}"]
        self.error(node, f"augmented assignment to {_describe(target)}")

    def stmt_If(self, node, depth):
        test = self.condition(node.test)
        out = [f"if ({test}) {{"] + self.block(node.body, 1) + ["}"]
        if node.orelse:
            out[-1] = "} else {"
            out += self.block(node.orelse, 1) + ["}"]
        return out

    def stmt_While(self, node, depth):
        self.loops_or_calls = True
        if node.orelse:
            self.error(node, "while ... else is not supported")
        test = self.condition(node.test)
        return [f"while ({test}) {{"] + self.block(node.body, 1) + ["}"]

    def stmt_For(self, node, depth):
        self.loops_or_calls = True
        if node.orelse:
            self.error(node, "for ... else is not supported")
        it = node.iter
        if not (isinstance(it, ast.Call) and self.resolve(it.func) is builtins.range):
            self.error(node, f"for loops go over range(...) only, not over {_describe(it)}")
        if it.keywords or not 1 <= len(it.args) <= 3:
            self.error(node, "range takes 1 to 3 positional arguments")
        if not isinstance(node.target, ast.Name):
            self.error(node, f"the loop variable must be a name, not {_describe(node.target)}")
        args = [self.expr(a) for a in it.args]
        for a in args:
            if not (isinstance(a.type, str) and is_int(a.type)):
                self.error(node, "range's arguments must be integers")
        start, stop, step = (Val("0LL", "i64"), args[0], Val("1LL", "i64")) if len(args) == 1 else (
            (args[0], args[1], Val("1LL", "i64")) if len(args) == 2 else tuple(args))
        # The loop runs on a hidden counter, as Python's does: the body may assign the loop variable.
        counter, end, stride = self.new_temp(), self.new_temp(), self.new_temp()
        var_assign = self.assign(node.target, Val(counter, "i64"), node)
        body = self.block(node.body, 1)
        step_const = it.args[2] if len(it.args) == 3 else None
        sign = _constant_sign(step_const)
        if sign is None and len(it.args) < 3:
            sign = 1
        if sign == 0:
            self.error(node, "range() step must not be zero")
        if sign == 1:
            test = f"{counter} < {end}"
        elif sign == -1:
            test = f"{counter} > {end}"
        else:
            test = f"({stride} > 0 ? {counter} < {end} : {counter} > {end})"
        return ["{",
                f"  const long long {end} = {_cast(stop, 'i64')}, {stride} = {_cast(step, 'i64')};",
                f"  for (long long {counter} = {_cast(start, 'i64')}; {test}; {counter} += {stride}) {{"] + \
            ["    " + ln for ln in var_assign] + ["  " + ln if not ln.startswith("#line") else ln for ln in body] + \
            ["  }", "}"]

    def stmt_Break(self, node, depth):
        return ["break;"]

    def stmt_Continue(self, node, depth):
        return ["continue;"]

    def stmt_Return(self, node, depth):
        if self.kernel:
            if node.value is not None and not (isinstance(node.value, ast.Constant) and node.value.value is None):
                self.error(node, "a kernel returns nothing (write results into an array)")
            barrier_on_cpu = self.module.device_kind == "cpu" and self.module_kernel_uses_barrier()
            return ["co_return;" if barrier_on_cpu else "return;"]
        if node.value is None:
            if self.return_type is not None:
                self.error(node, "a device function that returns a value on one path must on all of them")
            return ["return;"]
        v = self.expr(node.value)
        if not isinstance(v.type, str) or v.type == "tuple":
            self.error(node, "a device function returns one number (not a tuple or an array)")
        if not self.final:
            self.return_type = unify(self.return_type, v.type)
            return ["return;"]
        return [f"return {_cast(v, self.return_type)};"]

    def module_kernel_uses_barrier(self):
        return self.kernel_barrier

    kernel_barrier = False  # set by the caller before translating a kernel that calls syncthreads

    def stmt_Assert(self, node, depth):
        test = self.condition(node.test)
        text = self.info.text(self.info.line(node)).replace("\\", "\\\\").replace('"', '\\"')
        return [f'assert(({test}) && "{text}");']

    # ---- arrays declared in the function ----
    def declare_array(self, name, call):
        kind = "shared" if self.resolve(call.func) is _in.shared.array else "local"
        kw = {k.arg: k.value for k in call.keywords}
        args = list(call.args)
        shape_node = args[0] if args else kw.get("shape")
        dtype_node = args[1] if len(args) > 1 else kw.get("dtype")
        if shape_node is None or dtype_node is None:
            self.error(call, f"strata.{kind}.array(shape, dtype) needs both")
        shape = self.constant(shape_node)
        if isinstance(shape, int):
            shape = (shape,)
        if not (isinstance(shape, tuple) and shape and all(isinstance(s, int) and s >= 0 for s in shape)):
            self.error(call, f"strata.{kind}.array's shape must be an int or a tuple of ints known when compiling "
                       "(a literal or a global)")
        dtype = dtype_name(self.constant(dtype_node))
        if dtype is None:
            self.error(call, f"strata.{kind}.array's dtype is not one of {', '.join(C_TYPES)}")
        if name in self.arrays and self.arrays[name][0] != ArrayType(dtype, len(shape)):
            self.error(call, f"'{name}' is declared twice as different arrays")
        if shape == (0,):
            if kind != "shared":
                self.error(call, "a local array of size 0")
            self.arrays[name] = (ArrayType(dtype, 1), [0], "dynamic")
        else:
            self.arrays[name] = (ArrayType(dtype, len(shape)), list(shape), kind)

    def constant(self, node):
        """A value known when compiling: a literal, a tuple of them, or a global name."""
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Tuple):
            return tuple(self.constant(e) for e in node.elts)
        if isinstance(node, ast.BinOp) or isinstance(node, ast.UnaryOp):
            try:
                return eval(compile(ast.Expression(node), "<const>", "eval"),  # noqa: S307 (constants only)
                            {**self.info.globals, **self.info.closure})
            except Exception:  # noqa: BLE001
                self.error(node, f"{_describe(node)} is not known when compiling")
        v = self.resolve(node)
        if v is _NOT_FOUND:
            self.error(node, f"{_describe(node)} is not known when compiling")
        return v

    # ---- expressions ----
    def resolve(self, node):
        """The Python object a name or attribute chain stands for, when it is not a local or an argument."""
        if isinstance(node, ast.Name):
            n = node.id
            if n in self.arg_types or n in self.locals or n in self.arrays:
                return _NOT_FOUND
            for scope in (self.info.closure, self.info.globals, vars(builtins)):
                if n in scope:
                    return scope[n]
            return _NOT_FOUND
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            if base is _NOT_FOUND:
                return _NOT_FOUND
            return getattr(base, node.attr, _NOT_FOUND)
        return _NOT_FOUND

    def condition(self, node):
        v = self.expr(node)
        if not isinstance(v.type, str) or v.type == "tuple":
            self.error(node, f"{_describe(node)} is not a number or a bool")
        return v.code

    def expr(self, node):
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            self.error(node, f"strata.jit does not support the expression '{_describe(node)}' ({type(node).__name__})")
        return method(node)

    def expr_Constant(self, node):
        try:
            v = c_literal(node.value)
        except ValueError as e:
            self.error(node, str(e))
        if v is None:
            self.error(node, f"the constant {node.value!r} (numbers and bools only)")
        return v

    def expr_Name(self, node):
        n = node.id
        if n in self.arrays:
            t, extents, _kind = self.arrays[n]
            return Val(self.cname(n), t, shape=[f"{e}LL" for e in extents], array=n)
        if n in self.arg_types:
            t = self.arg_types[n]
            if isinstance(t, ArrayType):
                c = self.cname(n)
                return Val(c, t, shape=[f"{c}_shape{k}" for k in range(t.rank)], array=n)
            if n in self.locals:
                return Val(self.cname(n), self.locals[n])
            return Val(self.arg_cname(n), t)
        if n in self.locals:
            return Val(self.cname(n), self.locals[n])
        obj = self.resolve(node)
        if obj is _NOT_FOUND:
            if not self.final:
                return Val(self.cname(n), "bool")  # assigned later in the body: the next pass knows its type
            self.error(node, f"the name '{n}' is not defined (or is read before it is assigned)")
        return self.object_value(node, obj)

    def object_value(self, node, obj):
        if id(obj) in _in.DIM3:
            name, c = _in.DIM3[id(obj)]
            return Val(f"((long long){name}.{c})", "i64")
        v = c_literal(obj) if isinstance(obj, (bool, int, float)) else None
        if v is not None:
            return v
        self.error(node, f"{_describe(node)} (a {type(obj).__name__}) cannot be used as a value in a kernel")

    def expr_Attribute(self, node):
        obj = self.resolve(node)
        if obj is not _NOT_FOUND:
            if isinstance(node.value, ast.Name) and node.value.id == "math" and node.attr in MATH_CONSTANTS:
                return c_literal(MATH_CONSTANTS[node.attr])
            return self.object_value(node, obj)
        base = self.expr(node.value)
        if isinstance(base.type, ArrayType):
            if node.attr == "shape":
                return Val("", "tuple", items=[Val(s, "i64") for s in base.shape])
            if node.attr == "size":
                return Val("(" + " * ".join(base.shape) + ")", "i64")
            if node.attr == "ndim":
                return c_literal(base.type.rank)
        self.error(node, f"the attribute '{_describe(node)}'")

    def expr_Tuple(self, node):
        return Val("", "tuple", items=[self.expr(e) for e in node.elts])

    def expr_Subscript(self, node):
        return self.subscript(node)

    def subscript(self, node, address=False):
        """An element of an array (or an item of a tuple). Its Val's `checked` is (base, offset) when the index is
        checked without ending the thread (Note [Checked indices that vectorise]): loads read through
        checked_load, stores test the offset. address: the element's address is taken (atomics), so the index is
        asserted."""
        base = self.expr(node.value)
        index_nodes = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if base.type == "tuple":
            if len(index_nodes) != 1:
                self.error(node, "a tuple takes one index")
            k = self.constant(index_nodes[0])
            if not isinstance(k, int) or not -len(base.items) <= k < len(base.items):
                self.error(node, f"a tuple of {len(base.items)} indexed with {k!r} (a constant index is needed)")
            return base.items[k]
        if not isinstance(base.type, ArrayType):
            self.error(node, f"{_describe(node.value)} is not an array or a tuple")
        t = base.type
        for ix in index_nodes:
            if isinstance(ix, ast.Slice):
                self.error(node, f"slicing ({_describe(node)}); index every dimension with an integer")
        if len(index_nodes) != t.rank:
            self.error(node, f"{_describe(node)}: {len(index_nodes)} indices for the {t.rank}-D array "
                       f"'{base.array}' (index every dimension with an integer)")
        codes = []  # (C++ code, whether evaluating it has a side effect)
        for ix in index_nodes:
            effects = self.effects
            v = self.expr(ix)
            if not (isinstance(v.type, str) and is_int(v.type)):
                self.error(ix, f"the index {_describe(ix)} of '{base.array}' is not an integer")
            codes.append((_cast(v, "i64"), self.effects != effects))
        if base.array in self.arg_types:
            self.mark_written(base.array, node)
        dynamic = base.array in self.arrays and self.arrays[base.array][2] == "dynamic"
        check = self.boundscheck and not dynamic
        where = ", ".join(_describe(i) for i in index_nodes)
        if check and not address and self.straight_line and self.module.device_kind == "cpu" and \
                len(self.check_sites) < 64 and not any(effects for _, effects in codes):
            site = len(self.check_sites)
            text = f"{base.array}[{where}]: index out of bounds".replace('"', "'").replace("\\", "/")
            self.check_sites.append((self.info.line(node), text))
            index = ", ".join(f"{code}, {extent}" for (code, _), extent in zip(codes, base.shape))
            return Val(f"::strata::jit::cpu::checked_load<{site}>(__strata_idx, {base.code}, {index})", t.dtype,
                       checked=(base.code, site, index))
        flat = None
        for k, (code, effects) in enumerate(codes):
            if check:
                text = f"{base.array}[{where}]: index {k} out of bounds".replace('"', "'").replace("\\", "/")
                extent = base.shape[k]
                if effects:  # evaluated once, in a lambda (which keeps __LINE__ and the thread index in scope)
                    code = (f"([&]() -> long long {{ const long long pyj_i = {code}; "
                            f"assert((0 <= pyj_i && pyj_i < {extent}) && \"{text}\"); return pyj_i; }}())")
                else:
                    code = f"(assert((0 <= {code} && {code} < {extent}) && \"{text}\"), {code})"
            flat = code if flat is None else f"({flat}) * {base.shape[k]} + {code}"
        return Val(f"{base.code}[{flat}]", t.dtype)

    def mark_written(self, name, node):
        # Any indexed access counts as a possible write when it is a store: ast's ctx says which.
        ctx = getattr(node, "ctx", None)
        if not isinstance(ctx, ast.Load):
            self.written.add(name)

    def expr_UnaryOp(self, node):
        v = self.expr(node.operand)
        self.need_number(node.operand, v)
        if isinstance(node.op, ast.Not):
            return Val(f"(!{v.code})", "bool")
        if isinstance(node.op, ast.USub):
            t = promote(v.type, v.type)
            return Val(f"(-{_cast(v, t)})", t)
        if isinstance(node.op, ast.UAdd):
            return Val(_cast(v, promote(v.type, v.type)), promote(v.type, v.type))
        if isinstance(node.op, ast.Invert):
            if not is_int(v.type):
                self.error(node, "~ on a float")
            if v.type == "bool":
                return Val(f"(-1 - (int)({v.code}))", "i32")
            t = promote(v.type, v.type)
            return Val(f"(~{_cast(v, t)})", t)
        self.error(node, f"the operator in {_describe(node)}")

    def need_number(self, node, v):
        if not isinstance(v.type, str) or v.type == "tuple":
            self.error(node, f"{_describe(node)} is not a number")

    def expr_BinOp(self, node):
        return self.binop(self.expr(node.left), node.op, self.expr(node.right), node)

    def binop(self, a, op, b, node):
        self.need_number(node, a)
        self.need_number(node, b)
        t = promote(a.type, b.type)
        ca, cb = _cast(a, t), _cast(b, t)
        if isinstance(op, (ast.Add, ast.Sub, ast.Mult)):
            sym = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}[type(op)]
            return Val(f"({ca} {sym} {cb})", t)
        if isinstance(op, ast.Div):
            if is_int(t):
                return Val(f"({_cast(a, 'f64')} / {_cast(b, 'f64')})", "f64")
            return Val(f"({ca} / {cb})", t)
        if isinstance(op, ast.FloorDiv):
            helper = "pyj_floordiv" if is_int(t) else "pyj_ffloordiv"
            return Val(f"{helper}<{C_TYPES[t]}>({ca}, {cb})", t)
        if isinstance(op, ast.Mod):
            helper = "pyj_mod" if is_int(t) else "pyj_fmod"
            return Val(f"{helper}<{C_TYPES[t]}>({ca}, {cb})", t)
        if isinstance(op, ast.Pow):
            if is_int(t):
                return Val(f"pyj_ipow<{C_TYPES[t]}>({ca}, {cb})", t)
            return Val(f"pow({ca}, {cb})", t)
        if isinstance(op, (ast.BitAnd, ast.BitOr, ast.BitXor, ast.LShift, ast.RShift)):
            if not is_int(t):
                self.error(node, f"a bitwise operator on floats in {_describe(node)}")
            sym = {ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}[type(op)]
            if a.type == b.type == "bool" and sym in "&|^":
                return Val(f"((bool)({a.code} {sym} {b.code}))", "bool")
            return Val(f"({ca} {sym} {cb})", t)
        self.error(node, f"the operator {type(op).__name__} in {_describe(node)}")

    def expr_BoolOp(self, node):
        # Python's `and`/`or` give one of their operands; here they give a bool (their truth).
        sym = " && " if isinstance(node.op, ast.And) else " || "
        parts = []
        for v in node.values:
            parts.append(f"((bool)({self.condition(v)}))")
        return Val("(" + sym.join(parts) + ")", "bool")

    def expr_Compare(self, node):
        # a < b < c is (a < b) && (b < c). Where a middle operand has a side effect (an atomic, a call), the test is
        # a lambda that evaluates each operand with one once, in Python's order, just before the first comparison
        # that needs it, so c is evaluated only when a < b holds.
        ops = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
        for op in node.ops:
            if type(op) not in ops:
                self.error(node, f"the comparison {type(op).__name__} in {_describe(node)} (numbers only)")
        operands, effects = [], []
        for n in [node.left, *node.comparators]:
            before = self.effects
            v = self.expr(n)
            self.need_number(node, v)
            operands.append(v)
            effects.append(self.effects != before)
        lambda_form = any(effects[1:-1])
        held = {}  # comparison index -> statements before it
        if lambda_form:
            for j, v in enumerate(operands):
                if effects[j]:
                    name = self.new_temp()
                    held.setdefault(max(0, j - 1), []).append(f"const {C_TYPES[v.type]} {name} = {v.code};")
                    operands[j] = Val(name, v.type)
        parts = []
        for k, op in enumerate(node.ops):
            left, right = operands[k], operands[k + 1]
            t = promote(left.type, right.type)
            parts.append(f"({_cast(left, t)} {ops[type(op)]} {_cast(right, t)})")
        if not lambda_form:
            return Val("(" + " && ".join(parts) + ")", "bool")
        body = []
        for k, part in enumerate(parts):
            body += held.get(k, []) + [f"if (!{part}) return false;"]
        return Val("([&]() -> bool { " + " ".join(body) + " return true; }())", "bool")

    def expr_IfExp(self, node):
        test = self.condition(node.test)
        a, b = self.expr(node.body), self.expr(node.orelse)
        self.need_number(node, a)
        self.need_number(node, b)
        t = a.type if a.type == b.type else promote(a.type, b.type)
        return Val(f"(({test}) ? {_cast(a, t)} : {_cast(b, t)})", t)

    # ---- calls ----
    def expr_Call(self, node):
        fn = self.resolve(node.func)
        if fn is _NOT_FOUND:
            self.error(node, f"calling {_describe(node.func)}: not a function strata.jit knows (math's functions, "
                       "abs, min, max, int, float, bool, strata's intrinsics, @strata.jit(device=True) functions)")
        from strata._jit.decorator import Dispatcher  # noqa: PLC0415 (a cycle: the decorator uses this module)
        if isinstance(fn, Dispatcher):
            return self.call_device(node, fn)
        if node.keywords and fn not in (_in.shared.array, _in.local.array):
            self.error(node, f"keyword arguments in {_describe(node)}")
        args = node.args
        if fn is math.__dict__.get(getattr(fn, "__name__", ""), None) and fn.__name__ in MATH and \
                getattr(fn, "__module__", "math") in (None, "math"):
            return self.call_math(node, fn.__name__, args)
        if fn is builtins.abs:
            v = self.one_number(node, args)
            t = promote(v.type, v.type)
            return Val(f"pyj_abs<{C_TYPES[t]}>({_cast(v, t)})", t)
        if fn in (builtins.min, builtins.max):
            if len(args) < 2:
                self.error(node, f"{fn.__name__}() of one argument (give two or more numbers)")
            vals = [self.expr(a) for a in args]
            for a, v in zip(args, vals):
                self.need_number(a, v)
            t = vals[0].type
            for v in vals[1:]:
                t = promote(t, v.type)
            code = _cast(vals[0], t)
            for v in vals[1:]:
                code = f"pyj_{fn.__name__}<{C_TYPES[t]}>({code}, {_cast(v, t)})"
            return Val(code, t)
        if fn is builtins.len:
            v = self.expr(args[0]) if len(args) == 1 else None
            if v is None or not isinstance(v.type, ArrayType) and v.type != "tuple":
                self.error(node, "len() of something that is not an array or a tuple")
            return Val(v.shape[0], "i64") if isinstance(v.type, ArrayType) else c_literal(len(v.items))
        if fn in (builtins.int, builtins.float, builtins.bool) or dtype_name(fn) is not None and not isinstance(
                fn, str):
            v = self.one_number(node, args)
            t = {builtins.int: "i64", builtins.float: "f64", builtins.bool: "bool"}.get(fn) or dtype_name(fn)
            if t == "bool":
                return Val(f"((bool)({v.code}))", "bool")
            return Val(_cast(v, t), t)
        if fn is builtins.round:
            v = self.one_number(node, args)
            return Val(f"((long long)rint({_cast(v, 'f64')}))", "i64")
        if fn in (_in.grid, _in.gridsize):
            n = self.constant(args[0]) if len(args) == 1 else None
            if n not in (1, 2, 3):
                self.error(node, f"strata.{fn.name}(ndim) takes 1, 2 or 3")
            if fn is _in.grid:
                items = [Val(f"((long long)blockIdx.{c} * blockDim.{c} + threadIdx.{c})", "i64") for c in "xyz"[:n]]
            else:
                items = [Val(f"((long long)blockDim.{c} * gridDim.{c})", "i64") for c in "xyz"[:n]]
            return items[0] if n == 1 else Val("", "tuple", items=items)
        if fn is _in.syncthreads:
            if args:
                self.error(node, "strata.syncthreads() takes no arguments")
            if not self.kernel:
                self.error(node, "strata.syncthreads() in a device function (on the CPU a barrier must be in the "
                           "kernel itself)")
            self.uses_barrier = True
            return Val("__syncthreads()", "void")
        if fn in (_in.shared.array, _in.local.array):
            self.error(node, f"strata.{fn.name}(...) must be assigned to a name directly")
        if isinstance(fn, _in.Intrinsic) and fn.name.startswith("atomic."):
            return self.call_atomic(node, fn.name.split(".")[1], args)
        self.error(node, f"calling {_describe(node.func)} ({fn!r}) in a kernel")

    def one_number(self, node, args):
        if len(args) != 1:
            self.error(node, f"{_describe(node.func)} takes one argument")
        v = self.expr(args[0])
        self.need_number(args[0], v)
        return v

    def call_math(self, node, name, args):
        c, nargs, kind = MATH[name]
        if len(args) != nargs:
            self.error(node, f"math.{name} takes {nargs} argument{'s' if nargs > 1 else ''}")
        vals = [self.expr(a) for a in args]
        for a, v in zip(args, vals):
            self.need_number(a, v)
        t = "f32" if all(v.type == "f32" for v in vals) else "f64"
        code = f"{c}({', '.join(_cast(v, t) for v in vals)})"
        if kind == "int":
            return Val(f"((long long){code})", "i64")
        if kind == "bool":
            return Val(f"((bool){code})", "bool")
        return Val(code, t)

    def call_atomic(self, node, op, args):
        # strata.atomic.OP(array, index, value) (index: an int or a tuple), as Numba's; compare_and_swap(array, old,
        # value) works on array[0].
        if op == "compare_and_swap":
            if len(args) != 3:
                self.error(node, "strata.atomic.compare_and_swap(array, old, value) takes 3 arguments")
            arr_node, idx_node, vals = args[0], None, args[1:]
        else:
            if len(args) != 3:
                self.error(node, f"strata.atomic.{op}(array, index, value) takes 3 arguments")
            arr_node, idx_node, vals = args[0], args[1], args[2:]
        arr = self.expr(arr_node)
        if not isinstance(arr.type, ArrayType):
            self.error(node, f"strata.atomic.{op}'s first argument must be an array")
        index = ast.Tuple(elts=idx_node.elts if isinstance(idx_node, ast.Tuple) else [idx_node], ctx=ast.Store()) \
            if idx_node is not None else ast.Tuple(elts=[ast.Constant(0)] * arr.type.rank, ctx=ast.Store())
        sub = ast.Subscript(value=arr_node, slice=index, ctx=ast.Store())
        ast.copy_location(sub, node)
        for n in ast.walk(sub):
            if not hasattr(n, "lineno"):
                ast.copy_location(n, node)
        ref = self.subscript(sub, address=True)
        t = ref.type
        if t in ("bool", "u8"):
            self.error(node, f"strata.atomic.{op} on an array of {t}")
        values = [self.expr(v) for v in vals]
        for vn, v in zip(vals, values):
            self.need_number(vn, v)
        self.effects += 1
        cname = {"add": "atomicAdd", "sub": "atomicSub", "max": "atomicMax", "min": "atomicMin", "exch": "atomicExch",
                 "compare_and_swap": "atomicCAS"}[op]
        if t == "i64" and op in ("add", "sub", "exch", "compare_and_swap"):
            # CUDA has these for unsigned long long only; two's complement makes them the same.
            cast_vals = ", ".join(f"(unsigned long long)({_cast(v, 'i64')})" for v in values)
            return Val(f"((long long){cname}((unsigned long long*)&{ref.code}, {cast_vals}))", "i64")
        return Val(f"{cname}(&{ref.code}, {', '.join(_cast(v, t) for v in values)})", t)

    def call_device(self, node, dispatcher):
        if not dispatcher.device:
            self.error(node, f"calling the kernel '{dispatcher.__name__}' from a kernel (decorate it "
                       "@strata.jit(device=True))")
        if node.keywords:
            self.error(node, "keyword arguments in a call of a device function")
        self.loops_or_calls = True
        vals = [self.expr(a) for a in node.args]
        types = []
        for a, v in zip(node.args, vals):
            if v.type == "tuple" or v.type == "void":
                self.error(a, f"passing {_describe(a)} (a tuple or nothing) to a device function")
            types.append(v.type)
            if isinstance(v.type, ArrayType) and v.array in self.arg_types:
                self.written.add(v.array)  # the callee may write through it
        c_name, ret = translate_device(dispatcher, tuple(types), self.module, self.boundscheck, node, self.info)
        self.effects += 1
        call_args = []
        for v in vals:
            if isinstance(v.type, ArrayType):
                call_args += [v.code] + list(v.shape)
            else:
                call_args.append(v.code)
        return Val(f"{c_name}({', '.join(call_args)})", ret if ret is not None else "void")


def _constant_sign(node):
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return (node.value > 0) - (node.value < 0)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return -1 if node.operand.value else 0
    return None


def _escape(path):
    return str(path).replace("\\", "\\\\").replace('"', '\\"')


def _describe(node):
    try:
        return ast.unparse(node)
    except Exception:  # noqa: BLE001
        return type(node).__name__


def translate_device(dispatcher, types, module, boundscheck, call_node, caller_info):
    key = (dispatcher, types)
    if key in module.specialisations:
        return module.specialisations[key]
    if dispatcher in module.stack:
        raise TranslationError(f"'{dispatcher.__name__}' calls itself (recursion is not supported)",
                               caller_info.line(call_node), caller_info)
    info = dispatcher.function_info()
    if len(types) != len(info.args):
        raise TranslationError(f"'{info.name}' takes {len(info.args)} arguments; the call gives {len(types)}",
                               caller_info.line(call_node), caller_info)
    c_name = f"pyj_{info.name}_{len(module.specialisations)}"
    module.stack.append(dispatcher)
    try:
        t = FunctionTranslator(info, types, module, kernel=False, boundscheck=boundscheck, c_name=c_name)
        text = t.translate()
    finally:
        module.stack.pop()
    module.specialisations[key] = (c_name, t.return_type)
    module.functions.append(text)
    return c_name, t.return_type


def translate_kernel(info, types, device_kind, boundscheck):
    """The kernel's source for argument types `types` on `device_kind` ('cpu', 'cuda', 'hip'), and its name."""
    if len(types) != len(info.args):
        raise TranslationError(f"'{info.name}' takes {len(info.args)} arguments; got {len(types)}", info.first_line)
    module = Module(device_kind)
    c_name = info.name if info.name not in CPP_RESERVED and not info.name.startswith("pyj_") else f"pyj_{info.name}"
    t = FunctionTranslator(info, types, module, kernel=True, boundscheck=boundscheck, c_name=c_name)
    # A first pass finds out whether the kernel has a barrier: on the CPU such a kernel is a coroutine, whose return
    # is co_return.
    probe = FunctionTranslator(info, types, Module(device_kind), kernel=True, boundscheck=boundscheck, c_name=c_name)
    probe.translate()
    t.kernel_barrier = probe.uses_barrier
    t.straight_line = not probe.loops_or_calls
    text = t.translate()
    source = "\n".join(['#line 1 "<strata.jit helpers>"', PRELUDE.strip(), *module.functions, text]) + "\n"
    return source, c_name
