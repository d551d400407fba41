"""LLVM JIT for the CPU backend: host target machine, optimization, symbols.

One `CpuJit` owns one MCJIT engine. `compile(module)` verifies and optimizes an
llvmlite `ir.Module` for the host CPU (its name and features, so AVX-512 is
used where the machine has it), adds it to the engine and finalizes it;
`address(name)` then gives a function's entry point for ctypes.

`compile_objects(module, exported)` is the compiler's path: it splits the
module into self-contained parts and optimises + generates code for them
on several threads at once (see `partition_module` and `_compile_part`),
like XLA's split-module parallel codegen.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import ctypes.util
import functools
import hashlib
import os
import re
import struct
import tempfile
import threading
from typing import Optional, Sequence

from llvmlite import binding as llvm
from llvmlite import ir

import support
from xla.service.cpu import kernel_api

_INIT_LOCK = threading.Lock()

# LLVM command-line options, set once per process before the first
# optimisation (they are process-wide in llvmlite's LLVM). O3's unroll
# threshold (300) fully unrolls 32-trip loops of vectorized bodies (the
# tiled transposes, dynamic slices and row loops of our kernels) into
# thousands of instructions: the bench's rnn_scan module took 2.1 s in
# LLVM, 0.15 s with these, mlp_train 1.2 s -> 0.43 s, transformer 1.4 s ->
# 0.57 s (no run-time change measured; see cpu_compiler_test's note).
# Partial and runtime unrolling are off as well: LLVM unrolled the already
# interleaved (4 x 16-lane) vector loops 4x more, e.g. softmax's divide
# kernel from 84 to 702 lines of IR. Measured on the 11 bench programs
# (LLVM CPU time, one thread): softmax 87 -> 74 ms, layernorm 92 -> 80,
# convnet 163 -> 132, mlp_train 290 -> 257, topk 40 -> 30, the rest -3 to
# -10%; single-threaded run times unchanged within noise (+-5%). Full
# unrolling of short constant loops (conv windows, tiles) stays: turning
# all unrolling off made convnet's run 1.7x slower.
LLVM_OPTIONS = ("-unroll-threshold=100", "-unroll-full-max-count=16",
                "-unroll-allow-partial=false", "-unroll-runtime=false")


# Libraries whose functions kernels call: the C math library (fmodf, erf,
# atan2, ...) and the compiler runtime (half-precision conversions such as
# __truncdfhf2, which LLVM emits as calls).
_RUNTIME_LIBRARIES = (("libm.so.6", "m"), ("libgcc_s.so.1", "gcc_s"))


def _load_runtime_libraries() -> None:
  """Makes the symbols of `_RUNTIME_LIBRARIES` visible to the JIT's symbol
  resolution. The process has them loaded, but the resolver searches only
  libraries loaded through LLVM: without this, a kernel of a large module
  had its calls to fmodf and __truncdfhf2 bound to address 0 (a segfault in
  remainder and f64 -> f16 convert, seen on one host)."""
  for soname, short in _RUNTIME_LIBRARIES:
    # find_library runs ldconfig (about 3 ms each): only when the usual
    # soname does not load.
    for name in (soname, lambda short=short: ctypes.util.find_library(short)):
      if callable(name):
        name = name()
      if not name:
        continue
      try:
        llvm.load_library_permanently(name)
      except RuntimeError:
        continue
      break


@functools.lru_cache(maxsize=None)
def _initialize() -> None:
  with _INIT_LOCK:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    for option in LLVM_OPTIONS:
      llvm.set_option("xla_cpu", option)
    _load_runtime_libraries()


@functools.lru_cache(maxsize=None)
def host_target_info() -> kernel_api.TargetInfo:
  """The host's CPU name and features, and the vector width to aim at."""
  _initialize()
  name = llvm.get_host_cpu_name()
  features = llvm.get_host_cpu_features().flatten()
  if "+avx512f" in features:
    bits = 512
  elif "+avx2" in features or "+avx" in features:
    bits = 256
  else:
    bits = 128
  return kernel_api.TargetInfo(cpu_name=name, features=features,
                               vector_bits=bits)


@functools.lru_cache(maxsize=None)
def _target_machine(opt_level: int):
  return _new_target_machine(opt_level)


def _new_target_machine(opt_level: int):
  """A fresh target machine. An MCJIT engine takes ownership of (and frees)
  the one it is created with, so each engine gets its own, never the cached
  one above."""
  _initialize()
  info = host_target_info()
  target = llvm.Target.from_default_triple()
  return target.create_target_machine(cpu=info.cpu_name,
                                      features=info.features,
                                      opt=opt_level, reloc="default",
                                      codemodel="jitdefault")


def prefer_wide_vectors(fn: ir.Function) -> None:
  """Lets LLVM use the host's full vector width in `fn`: for AVX-512 hosts
  LLVM otherwise prefers 256-bit vectors, which measured 1.4x slower on the
  exp(tanh(x)) loop (see the report in cpu_compiler_test's benchmark)."""
  bits = host_target_info().vector_bits
  if bits < 512 or fn.is_declaration:
    return
  # A string attribute llvmlite can't name.
  set.add(fn.attributes, f'"prefer-vector-width"="{bits}"')


def configure_module(module: ir.Module) -> None:
  """Sets the host triple and data layout on a module before emission ends."""
  tm = _target_machine(3)
  module.triple = llvm.get_process_triple()
  module.data_layout = str(tm.target_data)


def optimize(mod: "llvm.ModuleRef", opt_level: int = 3) -> None:
  """Runs LLVM's standard O-level pipeline (with loop and SLP vectorization)."""
  tm = _target_machine(opt_level)
  pb = llvm.create_pass_builder(tm, _tuning_options(opt_level))
  pm = pb.getModulePassManager()
  try:
    pm.run(mod, pb)
  finally:
    _dispose_pass_manager(pm)


def _dispose_pass_manager(pm) -> None:
  """Frees a module pass manager. llvmlite's ModulePassManager never frees
  its LLVM object (its no-op base `_dispose` comes first in the method
  order), which leaked 30-55 KB per compiled part."""
  dispose = getattr(llvm.ffi.lib, "LLVMPY_DisposeNewModulePassManger", None)
  if dispose is None or pm.closed:
    return
  dispose(pm)
  pm.detach()


def _tuning_options(opt_level: int):
  pto = llvm.create_pipeline_tuning_options(speed_level=opt_level,
                                            size_level=0)
  pto.loop_vectorization = opt_level >= 2
  pto.slp_vectorization = opt_level >= 2
  pto.loop_unrolling = opt_level >= 2
  return pto


# Library routines (runtime_library.py) that kernels call by name: before
# code is loaded, each one it names is made resolvable through this hook
# (set by runtime_library, which builds on this module). An unresolved
# routine would otherwise be bound to address 0 by the engine.
LIBRARY_PREFIX = "__xla_cpu_lib_"
_LIBRARY_NAME = re.compile(r"__xla_cpu_lib_[A-Za-z0-9_]+")
_library_hook = None


def set_library_hook(hook) -> None:
  """`hook(names)` makes the library routines `names` resolvable."""
  global _library_hook
  _library_hook = hook


def _ensure_library(code) -> None:
  if isinstance(code, (bytes, bytearray, memoryview)):
    if LIBRARY_PREFIX.encode() not in code:
      return
    names = {m.decode() for m in
             re.findall(_LIBRARY_NAME.pattern.encode(), bytes(code))}
  else:
    if LIBRARY_PREFIX not in code:
      return
    names = set(_LIBRARY_NAME.findall(code))
  if _library_hook is not None:
    _library_hook(sorted(names))
  missing = [n for n in sorted(names) if not llvm.address_of_symbol(n)]
  if missing:
    raise support.InternalError(
        f"CPU code calls library routines that are not available: "
        f"{', '.join(missing)}")


# Functions with vector forms (math_routines.py): a declaration carries
# LLVM's vector-function ABI mapping in this attribute, naming the vector
# forms the loop vectorizer may call instead. Those are declared but not
# called before vectorisation, so LLVM would drop them first;
# `_keep_vector_variants` lists them in `llvm.compiler.used`.
VECTOR_VARIANT_ATTRIBUTE = "vector-function-abi-variant"
_VARIANT_NAMES = re.compile(r"_ZGV_LLVM_N\d+\w*?_[\w.$]+\(([\w.$]+)\)")


def _keep_vector_variants(text: str) -> str:
  """`text` with the vector forms its declarations name kept alive."""
  if VECTOR_VARIANT_ATTRIBUTE not in text:
    return text
  names = sorted(set(_VARIANT_NAMES.findall(text)))
  if not names:
    return text
  refs = ", ".join(f'ptr @"{n}"' for n in names)
  return (f"{text}\n@llvm.compiler.used = appending global "
          f"[{len(names)} x ptr] [{refs}], section \"llvm.metadata\"\n")


# -- a disk cache for code every process compiles the same ------------------
#
# Library routines (runtime_library.py) and the runtime's own native code
# (the native execute path, interpreter and worker pool) are the same LLVM
# IR in every process; compiling them cost every process's first compile
# about 60 ms before any of its own kernels. Their object code is kept on
# disk, keyed by the IR, the optimisation level, the host CPU and the LLVM
# version. A file that does not check out (truncated, damaged) is compiled
# again: the engine does not validate object files and would crash on one.

_CODE_MAGIC = b"XLACPULIB\0"


def code_cache_dir() -> Optional[str]:
  """Where such code is cached: $XLA_CPU_LIBRARY_CACHE, else the user's
  cache directory (XDG_CACHE_HOME or ~/.cache)/openxla_cpu/library. ""
  disables the disk cache."""
  env = os.environ.get("XLA_CPU_LIBRARY_CACHE")
  if env is not None:
    return env or None
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(
      os.path.expanduser("~"), ".cache")
  return os.path.join(base, "openxla_cpu", "library")


def _code_key(text: str, opt_level: int) -> str:
  info = host_target_info()
  h = hashlib.sha256()
  for part in (text, str(opt_level), info.cpu_name, info.features,
               ".".join(map(str, llvm.llvm_version_info))):
    h.update(part.encode())
    h.update(b"\0")
  return h.hexdigest()


def _pack_code(data: bytes) -> bytes:
  return _CODE_MAGIC + hashlib.sha256(data).digest() + data


def _unpack_code(blob: Optional[bytes]) -> Optional[bytes]:
  if not blob or not blob.startswith(_CODE_MAGIC):
    return None
  digest = blob[len(_CODE_MAGIC):len(_CODE_MAGIC) + 32]
  data = blob[len(_CODE_MAGIC) + 32:]
  return data if data and hashlib.sha256(data).digest() == digest else None


@functools.lru_cache(maxsize=None)
def source_key() -> str:
  """A digest of the Python sources that generate the runtime's own code
  (this package and the `xla` modules beside it: name, size and
  modification time of each) and of llvmlite's version. Code that every
  process generates the same way is cached under it, so that a process
  finds its object code without generating the IR first (building the
  native runner's or a library routine's IR cost 5-15 ms each)."""
  import llvmlite  # pylint: disable=g-import-not-at-top
  h = hashlib.sha256(llvmlite.__version__.encode())
  here = os.path.dirname(os.path.abspath(__file__))
  xla_root = os.path.dirname(os.path.dirname(here))
  for directory in (here, xla_root):
    try:
      entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
      continue
    for entry in entries:
      if entry.name.endswith(".py") and entry.is_file():
        st = entry.stat()
        h.update(f"{entry.path}:{st.st_size}:{st.st_mtime_ns}\0".encode())
  return h.hexdigest()


def cached_object_code(text, opt_level: int, name: str,
                       by_source: bool = False) -> bytes:
  """The object code of module `text` at `opt_level`, from the disk cache
  when it is there (`name` names the file), else compiled (and stored).
  `text` may be a function returning the text. With `by_source`, the
  cache key is `name` and `source_key()` instead of the text, which is
  then only made on a miss: for code that `name` and the sources
  determine (the same in every process)."""
  directory = code_cache_dir()
  path = None
  if directory:
    if by_source:
      key = _code_key(f"{name}\0{source_key()}", opt_level)
    else:
      text = text() if callable(text) else text
      key = _code_key(text, opt_level)
    path = os.path.join(directory, f"{name}-{key}.o")
    try:
      with open(path, "rb") as f:
        data = _unpack_code(f.read())
      if data is not None:
        return data
    except OSError:
      pass
  text = text() if callable(text) else text
  data = compile_objects_text(text, opt_level)
  if path:
    try:
      os.makedirs(directory, exist_ok=True)
      fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
      with os.fdopen(fd, "wb") as f:
        f.write(_pack_code(data))
      os.replace(tmp, path)
    except OSError as e:
      from support import log  # pylint: disable=g-import-not-at-top
      log.warning("CPU code cache: cannot write %s: %s", directory, e)
  return data


class CpuJit:
  """Compiles llvmlite modules for the host and hands out function addresses."""

  def __init__(self, opt_level: int = 3):
    _initialize()
    self._opt_level = opt_level
    self._tm = _new_target_machine(opt_level)
    backing = llvm.parse_assembly("")
    self._engine = llvm.create_mcjit_compiler(backing, self._tm)
    self._modules: list = []
    self._lock = threading.Lock()

  def load_cached(self, module, name: str) -> None:
    """Loads `module` (code that is the same in every process: the
    runtime's native helpers; an IR module or text, or a function making
    one, which is then called only when the disk code cache misses, see
    `cached_object_code`) through the disk code cache."""
    if callable(module):
      self.load_object_code(cached_object_code(
          lambda: str(module()), self._opt_level, name, by_source=True))
      return
    self.load_object_code(cached_object_code(str(module), self._opt_level,
                                             name))

  def compile(self, module: ir.Module | str) -> "llvm.ModuleRef":
    """Parses, verifies, optimizes and loads `module` (IR object or text)."""
    text = _keep_vector_variants(str(module))
    try:
      mod = llvm.parse_assembly(text)
      mod.verify()
    except RuntimeError as e:
      raise support.InternalError(
          f"CPU codegen produced invalid LLVM IR: {e}") from e
    mod.triple = llvm.get_process_triple()
    mod.data_layout = str(self._tm.target_data)
    optimize(mod, self._opt_level)
    _ensure_library(text)
    with self._lock:
      self._engine.add_module(mod)
      self._engine.finalize_object()
      self._engine.run_static_constructors()
      self._modules.append(mod)
    return mod

  def address(self, name: str) -> int:
    addr = self._engine.get_function_address(name)
    if not addr:
      raise support.NotFoundError(f"no compiled function named {name!r}")
    return addr

  def load_object_code(self, data: bytes, library: bool = False) -> None:
    """Loads machine code made by `object_code` or `pack_objects` (e.g.
    from the disk cache) into this engine; its functions are then found by
    `address`. The compilation cache uses it. `library`: the code is a
    library routine itself (it names itself; nothing to resolve)."""
    if not library:
      _ensure_library(data)
    objs = [llvm.ObjectFileRef.from_data(o) for o in unpack_objects(data)]
    with self._lock:
      for obj in objs:
        self._engine.add_object_file(obj)
        self._modules.append(obj)
      self._engine.finalize_object()

  def object_code(self, module: ir.Module | str) -> bytes:
    """Machine code for `module` as an object file (for the disk cache)."""
    mod = llvm.parse_assembly(_keep_vector_variants(str(module)))
    mod.triple = llvm.get_process_triple()
    mod.data_layout = str(self._tm.target_data)
    optimize(mod, self._opt_level)
    return self._tm.emit_object(mod)


# -- parallel compilation of a kernel module -----------------------------------
#
# LLVM time dominates our compile time (e.g. softmax: 94 of 155 ms, the
# transformer 380 of 547 ms) and is spent per function, so the compiler
# splits its module into self-contained parts and runs optimisation and
# code generation of the parts on several threads, each part in an LLVM
# context and target machine of its own (the same scheme as XLA's split
# module codegen). Every kernel is optimised as it is in one module: the
# kernels are external roots that never see each other's bodies, and each
# helper they call (scalar computations, tables) is copied into the parts
# that use it with internal linkage, so the copies cannot clash when the
# object files are loaded side by side.
#
# llvmlite serialises *every* call into LLVM behind one process-wide lock
# (binding/ffi.py), which would run the threads one after another. The two
# calls that do the work (the pass manager run and the object emission)
# therefore go to the ctypes functions behind llvmlite's wrappers: they
# touch only the part's own module, context, pass builder and target
# machine, which LLVM allows on different threads; ctypes drops the GIL
# while they run. If a future llvmlite moves those internals, parts are
# simply compiled one after another.
#
# Measured on the bench's 2-core machine while it was otherwise idle (LLVM
# phase, ms, 1 -> 2 threads): softmax 72 -> 52, layernorm 76 -> 57,
# transformer 365 -> 220, convnet 136 -> 83, mlp_train 254 -> 159, rnn_scan
# 82 -> 53. The split costs 4-8% more CPU time in all, so with no core to
# spare (another job busy on one) it is that much slower;
# XLA_CPU_COMPILE_THREADS=1 turns it off.

_OBJECTS_MAGIC = b"XLACPU-OBJECTS\0\0"

# Parts per compile thread. More parts than threads would balance uneven
# kernels better (the pool hands them out largest first), but each part
# costs CPU of its own (a module's fixed LLVM cost, copied helpers): with
# 2 threads, 4 parts took 3-8% more LLVM CPU time than 2 on the bench
# programs, which a busy 2-core machine pays in full.
_PARTS_PER_THREAD = 1

_GLOBAL_REF = re.compile(r'@"((?:[^"\\]|\\.)*)"|@([-A-Za-z$._][-\w$.]*)')


def compile_threads() -> int:
  """Threads for `compile_objects`: $XLA_CPU_COMPILE_THREADS, else the
  CPUs this process may run on."""
  env = os.environ.get("XLA_CPU_COMPILE_THREADS", "")
  if env.strip().isdigit() and int(env) > 0:
    return int(env)
  try:
    return max(1, len(os.sched_getaffinity(0)))
  except (AttributeError, OSError):
    return max(1, os.cpu_count() or 1)


def pack_objects(objects: Sequence[bytes]) -> bytes:
  """One blob holding several object files (what the disk cache stores);
  a single object is stored as itself."""
  if len(objects) == 1:
    return bytes(objects[0])
  out = [_OBJECTS_MAGIC, struct.pack("<I", len(objects))]
  for o in objects:
    out += [struct.pack("<Q", len(o)), bytes(o)]
  return b"".join(out)


def unpack_objects(data: bytes) -> list[bytes]:
  """The object files of a `pack_objects` blob (or a plain object file)."""
  data = bytes(data)
  if not data.startswith(_OBJECTS_MAGIC):
    return [data]
  pos = len(_OBJECTS_MAGIC)
  (count,) = struct.unpack_from("<I", data, pos)
  pos += 4
  out = []
  for _ in range(count):
    (n,) = struct.unpack_from("<Q", data, pos)
    pos += 8
    if pos + n > len(data):
      raise support.InternalError("truncated object file bundle")
    out.append(data[pos:pos + n])
    pos += n
  return out


def _refs(text: str) -> set[str]:
  return {a or b for a, b in _GLOBAL_REF.findall(text)}


def _unit_key(root: str, texts: dict[str, str], in_unit,
              refused=frozenset()) -> Optional[str]:
  """The text of `root` and of the helpers and constants it reaches
  (`in_unit(name, ref)`: whether a reference of `name` belongs to the
  unit), with their names replaced by placeholders in the order they are
  first used: two kernels with equal keys compile to the same code (the
  same sort with its own comparator, the same LAPACK call with its own
  argument constants). None where the unit reaches a name in `refused`."""
  seq: list[str] = []
  seen: set[str] = set()
  stack = [root]
  while stack:
    name = stack.pop()
    if name in seen:
      continue
    if name != root and name in refused:
      return None
    seen.add(name)
    seq.append(name)
    found = [a or b for a, b in _GLOBAL_REF.findall(texts[name])]
    stack.extend(reversed([d for d in found
                           if in_unit(name, d) and d not in seen]))
  mapping = {n: f'@"<{i}>"' for i, n in enumerate(seq)}

  def rename(m):
    name = m.group(1) or m.group(2)
    return mapping.get(name, m.group(0))
  return "\n".join(_GLOBAL_REF.sub(rename, texts[n]) for n in seq)


def _module_header(module: ir.Module) -> list[str]:
  """The lines a part's text starts with: the module's id, triple, data
  layout and identified types."""
  return ([f'; ModuleID = "{module.name}"',
           f'target triple = "{module.triple}"',
           f'target datalayout = "{module.data_layout}"', ""] +
          [t.get_declaration()
           for t in module.get_identified_types().values()])


def _text_with_linkage(fn: ir.Function, linkage: str) -> str:
  """`fn`'s text as if its linkage were `linkage` (the function itself is
  left as it was)."""
  saved = fn.linkage
  fn.linkage = linkage
  try:
    return str(fn)
  finally:
    fn.linkage = saved


def partition_module(module: ir.Module, exported: Sequence[str],
                     parts: int, aliases: Optional[dict[str, str]] = None
                     ) -> Optional[list[str]]:
  """Splits `module` into at most `parts` module texts that compile on
  their own; together they define every function named in `exported`
  (functions nothing exported reaches are dropped). Functions that call
  each other stay together. Returns None where the module cannot be split
  (a global variable that is not internal: it must exist once).

  With `aliases` (a dict to fill), an exported function that nothing
  calls and whose text, with the helpers and constants it uses, equals an
  earlier one's but for their names, is not compiled again:
  `aliases[name]` names the function that stands for it (the same fusion
  in every layer of a model is emitted once per layer; LLVM's time is the
  largest part of a compile)."""
  header = _module_header(module)
  # llvmlite prints a module's metadata only as part of the whole module.
  metadata = module._get_metadata_lines()  # pylint: disable=protected-access
  exported = set(exported)
  texts: dict[str, str] = {}
  refs: dict[str, set[str]] = {}
  order: list[str] = []
  declarations: list[str] = []
  for name, v in module.globals.items():
    if isinstance(v, ir.Function) and v.is_declaration:
      declarations.append(str(v))
      continue
    if isinstance(v, ir.GlobalVariable):
      if v.linkage not in ("internal", "private"):
        return None
      text = str(v)
    elif name in exported:
      text = str(v)
    elif v.linkage in ("internal", "private"):
      text = str(v)
    else:
      # A helper: internal in every part that uses it.
      text = _text_with_linkage(v, "internal")
    texts[name] = text
    refs[name] = _refs(text) & set(module.globals) - {name}
    order.append(name)
  if aliases is not None:
    referenced = set().union(*refs.values()) if refs else set()
    first: dict[str, str] = {}
    for name in [n for n in order if n in exported]:
      if name in referenced:
        continue
      key = _unit_key(name, texts,
                      lambda n, d: d in texts and d in refs[n], exported)
      if key is None:
        continue
      kept = first.setdefault(key, name)
      if kept != name:
        aliases[name] = kept
        order.remove(name)
        del texts[name]
  roots = [n for n in order if n in exported]
  if not roots:
    return None
  # The globals each root needs, and roots joined when one reaches another.
  parent = {r: r for r in roots}

  def find(r):
    while parent[r] != r:
      parent[r] = parent[parent[r]]
      r = parent[r]
    return r

  closure: dict[str, set[str]] = {}
  for r in roots:
    seen, stack = {r}, [r]
    while stack:
      for d in refs.get(stack.pop(), ()):
        if d in texts and d not in seen:
          seen.add(d)
          stack.append(d)
    closure[r] = seen
    for d in seen:
      if d in parent and find(d) != find(r):
        parent[find(d)] = find(r)
  shared = _shared_helpers(module, roots, closure)
  declare: dict[str, set[str]] = {}
  if shared:
    # Out-of-line helpers (`noinline`) that several roots use are compiled
    # once, in a part of their own, and declared where they are called:
    # copied into every part, each copy was optimised and compiled again
    # (an FFT program's axis transforms, shared by its kernels, cost most of
    # its LLVM time that way). The parts' object files are loaded into one
    # engine, which links the calls.
    for h in shared:
      texts[h] = _with_external_linkage(module.globals[h])
    roots = roots + sorted(shared - set(roots))
    parent.update({h: h for h in shared})
    closure = {}
    for r in roots:
      seen, stack, needs = {r}, [r], set()
      while stack:
        for d in refs.get(stack.pop(), ()):
          if d in shared and d != r:
            needs.add(d)
          elif d in texts and d not in seen:
            seen.add(d)
            stack.append(d)
      closure[r] = seen
      declare[r] = needs
    for r in roots:
      parent[r] = r
    for r in roots:
      for d in closure[r]:
        if d in parent and find(d) != find(r):
          parent[find(d)] = find(r)
  units: dict[str, set[str]] = {}
  for r in roots:
    units.setdefault(find(r), set()).update(closure[r])
  cost = {u: sum(len(texts[n]) for n in members)
          for u, members in units.items()}
  n = max(1, min(parts, len(units)))
  bins: list[set[str]] = [set() for _ in range(n)]
  loads = [0] * n
  for u in sorted(units, key=lambda u: (-cost[u], u)):
    i = loads.index(min(loads))
    bins[i] |= units[u]
    loads[i] += cost[u]
  out = []
  for members in sorted(bins, key=lambda m: -sum(len(texts[x]) for x in m)):
    body = [texts[x] for x in order if x in members]
    needed = set().union(*(declare.get(x, ()) for x in members)) - members
    extern = [_declaration(texts[x]) for x in sorted(needed)]
    out.append("\n".join(header + declarations + extern + body + metadata))
  return out


def _shared_helpers(module: ir.Module, roots: Sequence[str],
                    closure: dict[str, set[str]]) -> set[str]:
  """The `noinline` helper functions in the closures of two or more roots."""
  count: dict[str, int] = {}
  for r in roots:
    for d in closure[r]:
      if d != r:
        count[d] = count.get(d, 0) + 1
  out = set()
  for name, n in count.items():
    fn = module.globals.get(name)
    if (n >= 2 and isinstance(fn, ir.Function) and
        "noinline" in fn.attributes):
      out.add(name)
  return out


def _with_external_linkage(fn: ir.Function) -> str:
  return _text_with_linkage(fn, "")


def _declaration(text: str) -> str:
  """`declare` for the function defined by `text` (its header line up to
  the body)."""
  head = text.split("\n", 1)[0]
  head = head[:head.rindex("{")] if "{" in head else head
  return "declare" + head.strip()[len("define"):]


def _unlocked(name: str):
  """The ctypes function behind llvmlite's `ffi.lib.<name>`, without the
  process-wide lock (see above); None if llvmlite's internals differ."""
  try:
    return getattr(getattr(llvm.ffi.lib, name), "_cfn", None)
  except AttributeError:
    return None


def optimized_text(text: str, opt_level: int = 2) -> str:
  """What LLVM's pipeline makes of module `text` for this host, as text:
  for tests and dumps that look at the code kernels run (whether a loop
  was vectorized)."""
  _initialize()
  ctx = llvm.create_context()
  mod = llvm.parse_assembly(_keep_vector_variants(text), ctx)
  try:
    tm = _new_target_machine(opt_level)
    mod.triple = llvm.get_process_triple()
    mod.data_layout = str(tm.target_data)
    optimize(mod, opt_level)
    return str(mod)
  finally:
    mod.close()


def _compile_part(text: str, opt_level: int, unlocked: bool,
                  codegen_level: Optional[int] = None) -> bytes:
  """Parses, verifies, optimises and generates code for one module text in
  a fresh LLVM context; returns the object file. `codegen_level` is the
  target machine's (instruction selection, register allocation) level,
  `opt_level` unless given."""
  ctx = llvm.create_context()
  mod = None
  try:
    try:
      mod = llvm.parse_assembly(_keep_vector_variants(text), ctx)
      mod.verify()
    except RuntimeError as e:
      raise support.InternalError(
          f"CPU codegen produced invalid LLVM IR: {e}") from e
    tm = _new_target_machine(opt_level if codegen_level is None
                             else codegen_level)
    mod.triple = llvm.get_process_triple()
    mod.data_layout = str(tm.target_data)
    run = _unlocked("LLVMPY_RunNewModulePassManager") if unlocked else None
    emit = (_unlocked("LLVMPY_TargetMachineEmitToMemory") if unlocked
            else None)
    if run is None or emit is None:
      optimize(mod, opt_level)
      return tm.emit_object(mod)
    pb = llvm.create_pass_builder(tm, _tuning_options(opt_level))
    pm = pb.getModulePassManager()
    try:
      run(pm, mod, pb)
    finally:
      _dispose_pass_manager(pm)
    with llvm.ffi.OutputString() as err:
      buf = emit(tm, mod, 1, err)
      if not buf:
        raise support.InternalError(f"LLVM code generation failed: {err}")
    lib = llvm.ffi.lib
    try:
      return ctypes.string_at(lib.LLVMPY_GetBufferStart(buf),
                              lib.LLVMPY_GetBufferSize(buf))
    finally:
      lib.LLVMPY_DisposeMemoryBuffer(buf)
  finally:
    if mod is not None:
      mod.close()
    ctx.close()


def compile_objects_text(text: str, opt_level: int = 3) -> bytes:
  """The object file of a module given as LLVM IR text (parsed, verified,
  optimised and compiled on the calling thread)."""
  _initialize()
  return _compile_part(text, opt_level, unlocked=False)


_POOL_LOCK = threading.Lock()
_POOL: dict[tuple[int, int], concurrent.futures.ThreadPoolExecutor] = {}


def _pool(threads: int) -> concurrent.futures.ThreadPoolExecutor:
  """A lasting pool of `threads` compile threads. Keyed by process id too:
  a forked child (e.g. a multiprocessing worker) inherits the parent's
  pool object but not its threads, and would wait on it forever."""
  key = (os.getpid(), threads)
  with _POOL_LOCK:
    pool = _POOL.get(key)
    if pool is None:
      pool = concurrent.futures.ThreadPoolExecutor(
          threads, thread_name_prefix="xla-cpu-llvm")
      _POOL[key] = pool
    return pool


def compile_objects(module: ir.Module, exported: Sequence[str],
                    opt_level: int = 3,
                    threads: Optional[int] = None,
                    aliases: Optional[dict[str, str]] = None) -> list[bytes]:
  """Object files that together define `exported` (see the notes above);
  `threads` defaults to `compile_threads()`. With `aliases` (a dict to
  fill), duplicate functions are compiled once (see `partition_module`):
  the objects define `aliases.get(name, name)` for each exported name."""
  _initialize()
  threads = threads or compile_threads()
  texts = None
  if threads > 1 or aliases is not None:
    texts = partition_module(module, exported, threads * _PARTS_PER_THREAD,
                             aliases)
  if not texts or len(texts) == 1:
    return [_compile_part(texts[0] if texts else str(module), opt_level,
                          unlocked=False)]
  pool = _pool(min(threads, len(texts)))
  futures = [pool.submit(_compile_part, t, opt_level, True) for t in texts]
  return [f.result() for f in futures]


# -- compiling while the module is still being emitted -------------------------
#
# Emission (Python building LLVM IR) and LLVM's work (native, without the
# GIL) can overlap: `StreamingCompile` takes the kernels as they are
# finished and compiles them in parts on the compile threads while the
# emitter goes on with the next ones, so a large program's emission time is
# mostly hidden behind LLVM's. Parts follow the rules of `partition_module`
# (helpers and constants copied, internal, into every part that uses them;
# noinline helpers compiled once and declared elsewhere; a kernel equal to
# an earlier one with its helpers and constants compiled once), decided as
# parts are cut rather than over the whole module.

# Text (characters of LLVM IR) that makes a part; a smaller last part ends
# the compile sooner after emission, a larger one costs less per part.
STREAM_PART_CHARS = 60_000

# Small kernels. A kernel of at most SMALL_KERNEL_COST element-operations
# (kernel_api.KernelSpec.cost: the scalar and few-element kernels of a
# while loop's body, an ODE step, a PRNG key split) runs in well under a
# microsecond however it is compiled, but LLVM's code generation at O2
# (SelectionDAG, the greedy register allocator) costs about 0.7 ms per
# function whatever its size; at O0 (fast instruction selection and
# register allocation) a sixth of that. When a flush holds at least
# SMALL_KERNELS_MIN of them they are compiled in parts of their own with
# code generation at SMALL_KERNEL_CODEGEN_LEVEL; their IR is still
# optimised at the module's level. On the adaptive RK45 step's 18 such
# kernels, LLVM's share of the compile went from 55-68 ms to 30-37 ms.
SMALL_KERNEL_COST = 256
SMALL_KERNELS_MIN = 4
SMALL_KERNEL_CODEGEN_LEVEL = 0


class StreamingCompile:
  """Compiles the exported functions of `module` in parts while the rest of
  it is emitted. `add(names)` after each finished kernel (every function
  and global it reaches must be finished too); `finish(exported, aliases)`
  compiles what is left and returns the object files. `prepare(fn)` is
  applied to each function before it is turned into text (e.g. to add
  attributes the whole module gets)."""

  def __init__(self, module: ir.Module, opt_level: int = 3,
               threads: Optional[int] = None, prepare=None,
               part_chars: int = STREAM_PART_CHARS):
    _initialize()
    self.module = module
    self.opt_level = opt_level
    self.threads = threads or compile_threads()
    self.prepare = prepare
    self.part_chars = part_chars
    self._texts: dict[str, str] = {}
    self._refs: dict[str, set[str]] = {}
    self._pending: list[str] = []
    self._pending_chars = 0
    self._keys: dict[str, str] = {}
    self.aliases: dict[str, str] = {}
    self._defined_out_of_line: set[str] = set()  # noinline helpers placed
    self._compiled_roots: list[str] = []
    self._parts: list[str] = []
    self._futures: list = []
    self._streaming = self.threads > 1
    self._unsplittable = False
    self._compiled_roots_set: set[str] = set()
    self._no_alias: set[str] = set()
    self._small: set[str] = set()  # Kernels of SMALL_KERNEL_COST or less.

  # -- text ---------------------------------------------------------------------

  def _text(self, name: str) -> str:
    text = self._texts.get(name)
    if text is None:
      v = self.module.globals[name]
      if isinstance(v, ir.GlobalVariable):
        if v.linkage not in ("internal", "private"):
          self._unsplittable = True
        text = str(v)
      else:
        if self.prepare is not None:
          self.prepare(v)
        text = str(v)
      self._texts[name] = text
      self._refs[name] = {r for r in _refs(text) if r != name}
    return text

  def _is_defined_function(self, name: str) -> bool:
    v = self.module.globals.get(name)
    return isinstance(v, ir.Function) and not v.is_declaration

  def _is_noinline_helper(self, name: str) -> bool:
    v = self.module.globals.get(name)
    return isinstance(v, ir.Function) and "noinline" in v.attributes

  # -- adding kernels -----------------------------------------------------------

  def add(self, names: Sequence[str],
          costs: Optional[Sequence[int]] = None) -> None:
    """Takes finished kernels; `costs` (element-operations, 0: unknown)
    marks the small ones."""
    for i, name in enumerate(names):
      self._pending.append(name)
      self._pending_chars += len(self._text(name))
      if costs is not None and 0 < costs[i] <= SMALL_KERNEL_COST:
        self._small.add(name)
    if self._streaming and self._pending_chars >= self.part_chars:
      self._flush()

  def _closure(self, root: str, exported: set[str]):
    """(members, out_of_line): what `root`'s part must define (root,
    helpers, constants) and the noinline helpers and other roots it only
    needs declared."""
    members, out, stack = {root}, set(), [root]
    while stack:
      for d in self._refs.get(stack.pop(), ()):
        if d in members or d in out or d not in self.module.globals:
          continue
        v = self.module.globals[d]
        if isinstance(v, ir.Function) and v.is_declaration:
          continue
        self._text(d)
        if (d in exported or d in self._compiled_roots_set or
            self._is_noinline_helper(d)):
          out.add(d)
          continue
        members.add(d)
        stack.append(d)
    return members, out

  def _flush(self, final_exported: Optional[set[str]] = None) -> None:
    """Compiles the pending kernels as up to `threads` parts."""
    roots, self._pending, self._pending_chars = self._pending, [], 0
    if not roots:
      return
    exported = set(roots) | set(self._compiled_roots)
    if final_exported is not None:
      exported |= final_exported
    self._compiled_roots_set = set(self._compiled_roots)
    units = []
    for r in roots:
      members, out = self._closure(r, exported - {r})
      key = None if r in self._no_alias else _unit_key(
          r, self._texts, lambda n, d, members=members: d in members)
      kept = self._keys.setdefault(key, r) if key is not None else r
      if kept != r:
        self.aliases[r] = kept
        continue
      cost = sum(len(self._texts[m]) for m in members)
      units.append((cost, r, members, out))
      self._compiled_roots.append(r)
    if not units:
      return
    small = [u for u in units if u[1] in self._small]
    root_set = set(roots)
    if len(small) >= SMALL_KERNELS_MIN:
      self._submit_bins([u for u in units if u[1] not in self._small],
                        exported, root_set)
      self._submit_bins(small, exported, root_set,
                        SMALL_KERNEL_CODEGEN_LEVEL)
    else:
      self._submit_bins(units, exported, root_set)

  def _submit_bins(self, units: list, exported: set[str], root_set: set[str],
                   codegen_level: Optional[int] = None) -> None:
    """Spreads `units` (cost, root, members, out) over up to `threads`
    parts, largest first, and submits them."""
    if not units:
      return
    bins = [([], set(), 0) for _ in range(min(self.threads, len(units)))]
    for cost, r, members, out in sorted(units, key=lambda u: -u[0]):
      i = min(range(len(bins)), key=lambda k: bins[k][2])
      defined, declared, load = bins[i]
      defined.extend(m for m in members if m not in defined)
      for h in out:
        if (self._is_noinline_helper(h) and h not in exported and
            h not in self._defined_out_of_line):
          # Defined (external) in this part, declared in the others.
          self._defined_out_of_line.add(h)
          hm, hout = self._closure(h, exported)
          defined.extend(m for m in hm if m not in defined)
          declared |= hout
          cost += sum(len(self._texts[m]) for m in hm)
        else:
          declared.add(h)
      bins[i] = (defined, declared, load + cost)
    for defined, declared, _ in bins:
      if defined:
        self._submit(self._part_text(defined, declared - set(defined),
                                     root_set), codegen_level)

  def _part_text(self, defined: list[str], declared: set[str],
                 roots: set[str]) -> str:
    module = self.module
    header = _module_header(module)
    declarations = [str(v) for v in module.globals.values()
                    if isinstance(v, ir.Function) and v.is_declaration]
    extern = [_declaration(self._external_text(d)) for d in sorted(declared)]
    order = {n: i for i, n in enumerate(module.globals)}
    body = []
    for name in sorted(defined, key=order.__getitem__):
      if name in roots or name in self._defined_out_of_line:
        body.append(self._external_text(name))
      else:
        body.append(self._internal_text(name))
    # llvmlite prints a module's metadata only as part of the whole module.
    metadata = module._get_metadata_lines()  # pylint: disable=protected-access
    return "\n".join(header + declarations + extern + body + metadata)

  def _external_text(self, name: str) -> str:
    v = self.module.globals[name]
    if isinstance(v, ir.Function) and v.linkage in ("internal", "private"):
      return _with_external_linkage(v)
    return self._text(name)

  def _internal_text(self, name: str) -> str:
    v = self.module.globals[name]
    if isinstance(v, ir.Function) and v.linkage not in ("internal",
                                                         "private"):
      return _text_with_linkage(v, "internal")
    return self._text(name)

  def _submit(self, text: str, codegen_level: Optional[int] = None) -> None:
    self._parts.append(text)
    if self._streaming:
      pool = _pool(self.threads)
      self._futures.append(pool.submit(_compile_part, text, self.opt_level,
                                       True, codegen_level))

  # -- finishing ----------------------------------------------------------------

  def _prepare_all(self) -> None:
    if self.prepare is None:
      return
    for fn in self.module.functions:
      if not fn.is_declaration and fn.name not in self._texts:
        self.prepare(fn)

  def finish(self, exported: Sequence[str]) -> list[bytes]:
    """Object files defining every name of `exported` (through
    `self.aliases` for the ones compiled as another)."""
    if not self._streaming:
      self._prepare_all()
      return compile_objects(self.module, exported, self.opt_level,
                             threads=1, aliases=self.aliases)
    exported_set = set(exported)
    missing = [n for n in exported if n not in self._compiled_roots and
               n not in self.aliases and n not in self._pending]
    self._pending.extend(missing)
    for n in missing:
      self._text(n)
    self._flush(exported_set)
    # A kernel compiled as another is not defined: if a part calls it by
    # its own name (kernels rarely call kernels), it is compiled after all.
    called = set()
    for text in self._parts:
      called |= _refs(text)
    again = sorted(set(self.aliases) & called)
    for n in again:
      del self.aliases[n]
      self._no_alias.add(n)
    self._pending.extend(again)
    self._flush(exported_set)
    if self._unsplittable:
      # A global that must exist once: the module compiles as one part.
      for f in self._futures:
        f.cancel()
      self.aliases.clear()
      self._prepare_all()
      return [_compile_part(str(self.module), self.opt_level,
                            unlocked=False)]
    return [f.result() for f in self._futures]
