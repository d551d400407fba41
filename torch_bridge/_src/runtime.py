"""Compiling StableHLO programs through a PJRT client and running them on
torch tensors.

One client per (plugin name, thread count) per process. Executables are
cached by (plugin, thread count, program text): a cluster that occurs again
(another graph, a recompile of the same shapes) is compiled once.

The thread count is the client's `intra_op_parallelism_threads` create
option: how many threads one execution of a program splits its kernels
across. Torch runs its eager ops (autograd, the optimizer, fallbacks) on
threads of its own between the programs; a plugin that also keeps one
worker per core busy oversubscribes the cores (see backend.Options).

`Program` runs one compiled cluster per call. On a client whose buffers
live in host memory (PJRT_Buffer_IsOnCpu, e.g. any CPU plugin) it moves no
bytes it does not have to:

  * an input that is the same tensor object, with the same storage, as on
    the previous call (a weight, a buffer) becomes a PJRT view of the
    tensor's memory (PJRT_Client_CreateViewOfDeviceBuffer), made once and
    reused: the program reads the tensor's current bytes however they were
    written (an optimizer step, `p.data.copy_()`), so nothing is compared
    or transferred per call;
  * an input that is an output of a program (a saved activation of the
    forward pass going to the backward pass, a value between two clusters)
    is passed as the PJRT buffer it already is;
  * any other input (a batch, a tangent: a new tensor each call) up to
    256 KiB is copied into staging memory of the input's own, under a
    view made once; a larger one is copied in with one prepared
    PJRT_Client_BufferFromHostBuffer call;
  * outputs are torch tensors over the memory of their PJRT buffers
    (PJRT_Buffer_UnsafePointer), which they keep alive: no copy out.

Other clients (device memory) copy in and out.
"""

from __future__ import annotations

import collections
import ctypes
import hashlib
import itertools
import threading
import time
import weakref
from typing import Any, Sequence

import numpy as np
import torch

import pjrt
import support
from torch_bridge._src import artifact

DEFAULT_PLUGIN = artifact.DEFAULT_PLUGIN

_lock = threading.RLock()
_clients: dict[tuple[str, int], pjrt.Client] = {}
_executables: dict[tuple[str, int, str], pjrt.LoadedExecutable] = {}
# id(client) -> whether its buffers can be read and viewed in host memory.
_host_memory: dict[int, bool] = {}


THREADS_OPTION = "intra_op_parallelism_threads"


def client(plugin: str = DEFAULT_PLUGIN, threads: int = 0) -> pjrt.Client:
  """The process-wide client of `plugin` (a registered name, a library
  path, or `module:attribute`) whose executions use `threads` threads (0:
  the plugin's default). A plugin that refuses the create option (not
  ours) gets a client with its default."""
  key = (plugin, max(0, int(threads)))
  with _lock:
    c = _clients.get(key)
    if c is None:
      loaded = artifact.load_plugin(plugin)
      c = None
      if key[1]:
        try:
          c = pjrt.Client(loaded, {THREADS_OPTION: key[1]})
        except support.InvalidArgumentError:
          pass
      if c is None:
        c = pjrt.Client(loaded)
      _clients[key] = c
    return c


def compile_program(text: str, plugin: str = DEFAULT_PLUGIN, threads: int = 0
                    ) -> tuple[pjrt.LoadedExecutable, float, bool]:
  """(executable, seconds spent compiling, whether it came from the cache)
  for client(plugin, threads)."""
  threads = max(0, int(threads))
  key = (plugin, threads, hashlib.sha256(text.encode()).hexdigest())
  with _lock:
    exe = _executables.get(key)
    if exe is not None:
      return exe, 0.0, True
    c = client(plugin, threads)
    start = time.perf_counter()
    exe = c.compile(text)
    seconds = time.perf_counter() - start
    _executables[key] = exe
    return exe, seconds, False


def cache_size() -> int:
  return len(_executables)


def clear_cache() -> None:
  with _lock:
    _executables.clear()


# --------------------------------------------------------------------------
# Element types.

# torch dtype -> (PJRT element type, the numpy dtype of the same size that
# carries its bytes between torch and PJRT: numpy has no bfloat16).
_TYPES = {
    torch.float32: (pjrt.BufferType.F32, np.dtype(np.float32)),
    torch.float64: (pjrt.BufferType.F64, np.dtype(np.float64)),
    torch.float16: (pjrt.BufferType.F16, np.dtype(np.float16)),
    torch.bfloat16: (pjrt.BufferType.BF16, np.dtype(np.int16)),
    torch.int64: (pjrt.BufferType.S64, np.dtype(np.int64)),
    torch.int32: (pjrt.BufferType.S32, np.dtype(np.int32)),
    torch.int16: (pjrt.BufferType.S16, np.dtype(np.int16)),
    torch.int8: (pjrt.BufferType.S8, np.dtype(np.int8)),
    torch.uint8: (pjrt.BufferType.U8, np.dtype(np.uint8)),
    torch.bool: (pjrt.BufferType.PRED, np.dtype(np.bool_)),
}


def _to_numpy(t: torch.Tensor) -> np.ndarray:
  """A host array of `t`'s values (a view where `t` is dense on the CPU)."""
  t = t.detach()
  if t.device.type != "cpu":
    t = t.cpu()
  t = t.contiguous()
  if t.dtype == torch.bfloat16:
    import ml_dtypes  # pylint: disable=g-import-not-at-top
    return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
  return t.numpy()


def _from_numpy(array: np.ndarray) -> torch.Tensor:
  if array.dtype.name == "bfloat16":
    return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
  return torch.from_numpy(array)


def execute(exe: pjrt.LoadedExecutable, c: pjrt.Client,
            inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
  """Runs `exe` once, copying in and out (no state kept between calls)."""
  buffers = [c.buffer_from_numpy(_to_numpy(t)) for t in inputs]
  return [_from_numpy(_writeable(o.to_numpy()))
          for o in exe.execute(buffers)]


def _writeable(array: np.ndarray) -> np.ndarray:
  return array if array.flags.writeable else array.copy()


def rebuild(structure: Any, values: list[torch.Tensor]) -> Any:
  if structure is None:
    return None
  if isinstance(structure, int):
    return values[structure]
  return type(structure)(rebuild(s, values) for s in structure)


# --------------------------------------------------------------------------
# Zero-copy transfers.

# Views need the data at least this aligned (compiled code may assume the
# alignment of the buffers the plugin allocates itself).
_VIEW_ALIGNMENT = 64


def host_memory(c: pjrt.Client) -> bool:
  """Whether `c`'s buffers are in host memory that a pointer reaches, and
  the client can view host memory as a buffer: the zero-copy paths."""
  key = id(c)
  known = _host_memory.get(key)
  if known is None:
    known = _host_memory[key] = _probe_host_memory(c)
  return known


def _probe_host_memory(c: pjrt.Client) -> bool:
  plugin = c.plugin
  if not all(plugin.has(s) for s in (
      "Buffer_IsOnCpu", "Buffer_UnsafePointer",
      "Client_CreateViewOfDeviceBuffer", "Client_BufferFromHostBuffer")):
    return False
  try:
    data = np.arange(16, dtype=np.float32)
    buf = c.buffer_from_numpy(data)
    if not buf.is_on_cpu:
      return False
    pointer = plugin.call("Buffer_UnsafePointer",
                          buffer=buf.handle).buffer_pointer
    if not pointer:
      return False
    read = np.ctypeslib.as_array((ctypes.c_float * 16).from_address(pointer))
    if not np.array_equal(read, data):
      return False
    aligned = _aligned_empty(16, np.float32)
    aligned[:] = data
    view = _view(c, aligned.ctypes.data, pjrt.BufferType.F32, (16,))
    return bool(np.array_equal(view.to_numpy(), data))
  except support.XlaError:
    return False


def _aligned_empty(count: int, dtype) -> np.ndarray:
  dtype = np.dtype(dtype)
  raw = np.empty(count * dtype.itemsize + _VIEW_ALIGNMENT, np.uint8)
  start = -raw.ctypes.data % _VIEW_ALIGNMENT
  return raw[start:start + count * dtype.itemsize].view(dtype)


# The on_delete_callback of every view (PJRT_Client_CreateViewOfDeviceBuffer
# requires one): the viewed tensor is held by the Program, as long as the
# view is, so there is nothing to release.
@ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
def _view_deleted(unused_data, unused_arg):
  pass


def _view(c: pjrt.Client, data: int, element_type: int,
          shape: tuple[int, ...]) -> pjrt.Buffer:
  """A buffer over the dense row-major data at `data`, which must stay
  alive and in place as long as the buffer is used."""
  args = c.plugin.call(
      "Client_CreateViewOfDeviceBuffer", client=c.handle,
      device=c.addressable_devices()[0].handle, device_buffer_ptr=data,
      element_type=int(element_type), dims=list(shape) or [0],
      num_dims=len(shape), on_delete_callback=_view_deleted)
  return pjrt.Buffer(c, args.buffer)


_Ptr = ctypes.c_void_p
# `PJRT_Error* f(void* args)`: a slot's function called with the address of
# its argument struct.
_BY_ADDRESS = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)


class _Lane:
  """The PJRT calls of a Program's steps, with argument structs made once
  and the plugin's functions called directly (Plugin.call's checks, and
  the client's Buffer object per output, tracked by the client and
  destroyed through it, cost more than the plugin's work for the small
  tensors of a step). Buffers here are raw handles: an output's is owned
  by the owner under its tensor (_owner_type), an input copy's by the call.

  For one thread at a time: each Program owns one, under its lock.
  """

  def __init__(self, exe: pjrt.LoadedExecutable, c: pjrt.Client,
               num_args: int, num_outputs: int):
    abi = pjrt.abi
    self.client = c
    self.plugin = plugin = c.plugin
    device = c.addressable_devices()[0]

    def prepared(slot, **fields):
      args = abi.make_args(abi.args_type(slot), **fields)
      return plugin.function(slot), args, ctypes.byref(args)

    self._pointer_fn, self._pointer, self._pointer_p = prepared(
        "Buffer_UnsafePointer")
    self._upload_fn, self._upload, self._upload_p = prepared(
        "Client_BufferFromHostBuffer", client=c.handle,
        device=device.handle, host_buffer_semantics=int(
            abi.HostBufferSemantics.IMMUTABLE_ONLY_DURING_CALL))
    self._await_fn, self._await, self._await_p = prepared("Event_Await")
    self._event_destroy_fn, self._event_destroy, self._event_destroy_p = (
        prepared("Event_Destroy"))
    self._destroy_fn = plugin.function("Buffer_Destroy")
    self._destroy_type = abi.args_type("Buffer_Destroy")
    self._destroy_free = [self._destroy_args()]
    # One device's argument and output lists.
    self._arguments = (_Ptr * max(1, num_args))()
    self._outputs = (_Ptr * max(1, num_outputs))()
    self._argument_lists = (_Ptr * 1)(ctypes.addressof(self._arguments))
    self._output_lists = (_Ptr * 1)(ctypes.addressof(self._outputs))
    self._events = (_Ptr * 1)()
    self._exe = exe  # Its handle is in the struct below.
    self._execute_fn, self._execute, self._execute_p = prepared(
        "LoadedExecutable_Execute", executable=exe.handle,
        options=abi.make_args(abi.PJRT_ExecuteOptions),
        argument_lists=self._argument_lists, num_devices=1,
        num_args=num_args, output_lists=self._output_lists,
        device_complete_events=self._events)
    self._num_outputs = num_outputs
    # Buffer_UnsafePointer's (function, args, args address), for the output
    # loop: the function takes the address as a c_void_p, which ctypes
    # converts faster than a byref to a typed pointer.
    self.pointer_call = (
        _BY_ADDRESS(ctypes.cast(self._pointer_fn, ctypes.c_void_p).value),
        self._pointer, ctypes.addressof(self._pointer))

  def raise_error(self, error: int) -> None:
    raise self.plugin.take_error(error)

  def execute(self, handles: list[int]) -> list[int]:
    """Runs the program on buffer `handles`; returns the output handles
    (the caller owns them) once it has run."""
    if handles:
      self._arguments[:len(handles)] = handles
    self._events[0] = None
    error = self._execute_fn(self._execute_p)
    if error:
      self.raise_error(error)
    outputs = self._outputs[:self._num_outputs]
    event = self._events[0]
    if event:
      self._await.event = event
      error = self._await_fn(self._await_p)
      self._event_destroy.event = event
      destroy_error = self._event_destroy_fn(self._event_destroy_p)
      if destroy_error:
        self.plugin.take_error(destroy_error)
      if error:
        for handle in outputs:
          self.destroy(handle)
        self.raise_error(error)
    return outputs

  def _destroy_args(self) -> tuple[Any, Any]:
    args = self._destroy_type(self._destroy_type.STRUCT_SIZE, None, None)
    return args, ctypes.byref(args)

  def destroy(self, handle: int) -> None:
    """Destroys a buffer handle (any thread: each call takes a struct of
    its own from a free list, as making one costs more than the call)."""
    if handle and not self.client.closed:
      free = self._destroy_free
      try:
        args, args_p = free.pop()
      except IndexError:
        args, args_p = self._destroy_args()
      args.buffer = handle
      error = self._destroy_fn(args_p)
      free.append((args, args_p))
      if error:
        self.plugin.take_error(error)

  def upload(self, data: int, element_type: int, dims: Any, rank: int
             ) -> int:
    """A buffer handle holding a copy of the dense row-major data at
    `data` (copied during the call: the memory may change once it
    returns)."""
    args = self._upload
    args.data = data
    args.type = element_type
    args.dims = dims
    args.num_dims = rank
    args.done_with_host_buffer = None
    error = self._upload_fn(self._upload_p)
    if error:
      self.raise_error(error)
    handle = args.buffer
    event = args.done_with_host_buffer
    if event:
      self._event_destroy.event = event
      error = self._event_destroy_fn(self._event_destroy_p)
      if error:
        self.plugin.take_error(error)
    return handle

  def view(self, data: int, element_type: int, shape: tuple[int, ...]
           ) -> pjrt.Buffer:
    return _view(self.client, data, element_type, shape)


def _owner_type(nbytes: int) -> type:
  """The class of the objects that own output buffers of `nbytes` bytes.

  An owner is a ctypes array over the buffer's memory (its buffer protocol
  is how numpy, and through it torch, see the memory: numpy's ndarray
  constructor over it is the cheapest way to a shaped tensor we found,
  ~1.5 us against ~4 us through __array_interface__) that releases the
  buffer when the last tensor over it goes. Its one attribute, `rec`, is
  the buffer's record (handle, type key, data address, lane), which is
  also its entry in `_produced`. One class per size, made once.
  """
  cls = _owner_types.get(nbytes)
  if cls is None:
    cls = _owner_types[nbytes] = type(
        f"_Owner{nbytes}", (ctypes.c_uint8 * nbytes,),
        {"__slots__": ("rec",),
         "__del__": (_owner_del if nbytes <= _DEFER_MAX_BYTES
                     else _owner_del_now)})
  return cls


_owner_types: dict[int, type] = {}

# A small buffer whose last tensor went is destroyed with others, in one
# loop (`release_pending`), rather than from its owner's finalizer: a
# training step drops dozens of them (the activations its backward read,
# the gradients the optimizer applied), and a PJRT call per finalizer cost
# more than the rest of the finalizer. The loop runs before every program
# call (so the next outputs can reuse the memory) and whenever more than
# _PENDING_MAX buffers wait; a buffer above _DEFER_MAX_BYTES is destroyed
# at once. So at most _PENDING_MAX * _DEFER_MAX_BYTES bytes wait.
_DEFER_MAX_BYTES = 1 << 18
_PENDING_MAX = 64
# Inputs up to this size that are new tensors each call go through a
# staging copy per slot (Program._handle); larger ones are uploaded.
_STAGE_MAX_BYTES = 1 << 18
_pending: collections.deque = collections.deque()


def _owner_del(self):
  try:
    rec = self.rec
    if _produced.get(rec[2]) is rec:
      del _produced[rec[2]]
    _pending.append(rec)
    if len(_pending) > _PENDING_MAX:
      release_pending()
  except Exception:  # pylint: disable=broad-except
    pass  # Nothing sensible to do in a finalizer.


def _owner_del_now(self):
  try:
    rec = self.rec
    if _produced.get(rec[2]) is rec:
      del _produced[rec[2]]
    rec[3].destroy(rec[0])
  except Exception:  # pylint: disable=broad-except
    pass  # Nothing sensible to do in a finalizer.


def release_pending() -> int:
  """Destroys the buffers of outputs whose last tensor went and that wait
  to be destroyed together (any thread); returns how many it destroyed."""
  pending = _pending
  count = 0
  while True:
    try:
      rec = pending.popleft()
    except IndexError:
      return count
    rec[3].destroy(rec[0])
    count += 1


# No output kept raw (Program._tensors' default).
_KEEP_NONE = itertools.repeat(False)


class Kept:
  """Outputs of a program that one caller keeps as raw buffer handles
  rather than tensors (Program.call_raw), e.g. the activations the lean
  training runtime saves for its backward, which only a program reads:
  making a tensor of each, and later finding its buffer again, costs more
  than the rest of its way. Holds `values` (raw handles, or tensors where
  the program fell back to eager) until `release` or its own end.

  Args:
    program: the program whose outputs `indices` the values are.
    indices: the output index of each value.
    values: the raw handles (ints) or tensors.
  """

  __slots__ = ("_program", "_indices", "_values")

  def __init__(self, program: "Program", indices: Sequence[int],
               values: list[Any]):
    self._program = program
    self._indices = list(indices)
    self._values = values

  @property
  def released(self) -> bool:
    return self._values is None

  def values(self) -> list[Any]:
    """The values, raw handles as they are (for Program.call_raw)."""
    if self._values is None:
      raise RuntimeError("the kept buffers were already released")
    return self._values

  def tensors(self) -> list[torch.Tensor]:
    """The values as tensors (for an eager fallback): raw handles become
    tensors over their buffers, which then own them."""
    values = self.values()
    raw = [i for i, v in enumerate(values) if type(v) is int]  # pylint: disable=unidiomatic-typecheck
    if raw:
      handles = [values[i] for i in raw]
      # The tensors own the buffers from here on, even if adopting fails
      # part-way (Program._tensors destroys the rest).
      for i in raw:
        values[i] = None
      made = self._program.adopt(handles, [self._indices[i] for i in raw])
      for i, t in zip(raw, made):
        values[i] = t
    return values

  def release(self) -> None:
    """Lets go of the values: raw buffers are destroyed with the next
    batch (release_pending)."""
    values, self._values = self._values, None
    if values:
      lane = self._program._lane  # pylint: disable=protected-access
      for v in values:
        if type(v) is int:  # pylint: disable=unidiomatic-typecheck
          _pending.append((v, None, 0, lane))
      if len(_pending) > _PENDING_MAX:
        release_pending()

  def __del__(self):
    try:
      self.release()
    except Exception:  # pylint: disable=broad-except
      pass  # Nothing sensible to do in a finalizer.


# Output data address -> its buffer's record (handle, (dtype, shape) key,
# address, lane): a program input that is a whole tensor over it is passed
# as the buffer itself. An entry lives exactly as long as the buffer's
# owner (its finalizer removes it), so every entry is right.
_produced: dict[int, tuple[int, tuple, int, Any]] = {}

# (dtype, shape) -> the one tuple that stands for it, so that a buffer
# and a program input of the same type compare by identity.
_type_keys: dict[tuple, tuple] = {}


def _type_key(dtype: torch.dtype, shape: tuple[int, ...]) -> tuple:
  return _type_keys.setdefault((dtype, tuple(shape)), (dtype, tuple(shape)))


def _byte_size(np_dtype: np.dtype, shape: Sequence[int]) -> int:
  """Bytes of a dense array of `np_dtype` and `shape`."""
  nbytes = np_dtype.itemsize
  for d in shape:
    nbytes *= d
  return nbytes


class _Slot:
  """What a Program knows about one of its inputs: the type the program
  takes, and the view it made of the tensor that keeps coming back."""

  __slots__ = ("shape", "dtype", "key", "element_type", "dims", "rank",
               "last", "view_of", "view_pointer", "view", "view_handle",
               "nbytes", "stage", "stage_address", "stage_handle")

  def __init__(self, shape: tuple[int, ...], dtype: torch.dtype):
    self.shape = torch.Size(shape)
    self.dtype = dtype
    self.key = _type_key(dtype, shape)
    self.element_type = int(_TYPES[dtype][0])
    self.rank = len(shape)
    self.dims = (ctypes.c_int64 * max(1, len(shape)))(*shape)
    self.last = None        # weakref to the previous call's tensor
    self.view_of = None     # the tensor `view` reads (kept alive by it)
    self.view_pointer = 0
    self.view = None
    self.view_handle = 0
    self.nbytes = _byte_size(_TYPES[dtype][1], shape)
    # The staging memory a small input that is a new tensor each call is
    # copied into (see Program._handle), with the view over it.
    self.stage = None
    self.stage_address = 0
    self.stage_handle = 0


class _Result:
  __slots__ = ("shape", "dtype", "np_dtype", "key", "owner", "view_dtype",
               "empty")

  def __init__(self, shape: tuple[int, ...], dtype: torch.dtype):
    self.shape = tuple(shape)
    self.dtype = dtype
    self.np_dtype = _TYPES[dtype][1]
    self.key = _type_key(dtype, shape)
    self.empty = any(d == 0 for d in shape)
    nbytes = _byte_size(self.np_dtype, shape)
    self.owner = _owner_type(nbytes) if not self.empty else None
    # numpy carries bf16 as int16: the tensor is viewed as bf16 after.
    self.view_dtype = (dtype if torch.from_numpy(np.empty(
        0, self.np_dtype)).dtype is not dtype else None)


def supported_dtype(dtype: torch.dtype) -> bool:
  return dtype in _TYPES


class Program:
  """A compiled program called with torch tensors of fixed types.

  Args:
    exe: the executable.
    c: its client.
    arg_types: (shape, dtype) of each parameter.
    result_types: (shape, dtype) of each result.
  """

  def __init__(self, exe: pjrt.LoadedExecutable, c: pjrt.Client,
               arg_types: Sequence[tuple[tuple[int, ...], torch.dtype]],
               result_types: Sequence[tuple[tuple[int, ...], torch.dtype]]):
    self._exe = exe
    self._client = c
    self._zero_copy = (host_memory(c) and
                       all(supported_dtype(d) for _, d in arg_types) and
                       all(supported_dtype(d) for _, d in result_types))
    self._slots = [_Slot(tuple(s), d) for s, d in arg_types]
    self._results = [_Result(tuple(s), d) for s, d in result_types]
    self._lane = (_Lane(exe, c, len(self._slots), len(self._results))
                  if self._zero_copy else None)
    # Per result, what the output loop reads: (owner class or None for an
    # empty result, type key, shape, numpy dtype, dtype to view as).
    self._plan = [(r.owner, r.key, r.shape, r.np_dtype, r.view_dtype)
                  for r in self._results]
    # The lane's structs and the slots' views are used by one call at a
    # time; a concurrent call takes the copying path.
    self._busy = threading.Lock()

  def __call__(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    if not self._zero_copy or not self._busy.acquire(blocking=False):
      return self._copying(inputs)
    return self._run(inputs, None)

  @property
  def zero_copy(self) -> bool:
    """Whether the program passes buffers rather than bytes (call_raw)."""
    return self._zero_copy

  @property
  def client(self) -> pjrt.Client:
    return self._client

  def input_key(self, index: int) -> tuple:
    """The (dtype, shape) key of input `index` (compare with `is`)."""
    return self._slots[index].key

  @property
  def output_keys(self) -> list[tuple]:
    """The (dtype, shape) key of each output (compare with `is`)."""
    return [r.key for r in self._results]

  def call_raw(self, inputs: Sequence[Any], keep: Sequence[bool] | None
               ) -> list[Any]:
    """A call for a caller that keeps some values as buffers (the lean
    training runtime's saved activations): an input may be a raw buffer
    handle (an int this client made, of the input's type, left alive by
    the caller), and each output `keep[i]` is true for is returned as its
    raw handle, which the caller then owns (Kept). Waits for a concurrent
    call instead of copying; needs `zero_copy`."""
    if not self._zero_copy:
      raise support.InvalidArgumentError(
          "raw buffers need a program whose client shares host memory")
    self._busy.acquire()
    return self._run(inputs, keep)

  def adopt(self, handles: Sequence[int], indices: Sequence[int]
            ) -> list[torch.Tensor]:
    """Tensors over raw handles of this program's outputs `indices`, which
    from then on own them."""
    with self._busy:
      return self._tensors(self._lane, list(handles), None,
                           [self._plan[i] for i in indices])

  def _run(self, inputs: Sequence[Any], keep: Sequence[bool] | None
           ) -> list[Any]:
    """The call, with the lane's lock held (released here)."""
    lane = self._lane
    copies: list[Any] = []  # Input copies made for this call.
    try:
      if _pending:
        release_pending()  # Their memory can hold this call's outputs.
      if len(inputs) != len(self._slots):
        raise support.InvalidArgumentError(
            f"the program takes {len(self._slots)} inputs, got {len(inputs)}")
      handles = []
      produced = _produced
      for slot, t in zip(self._slots, inputs):
        # Inline, the common cases: the weight viewed last time, and an
        # output of a program (a saved activation) whole.
        if slot.view_of is t:
          if (t.data_ptr() == slot.view_pointer and t.shape == slot.shape
              and t.is_contiguous()):
            handles.append(slot.view_handle)
            continue
        elif type(t) is int:  # pylint: disable=unidiomatic-typecheck
          handles.append(t)  # A raw buffer (call_raw).
          continue
        else:
          entry = produced.get(t.data_ptr())
          if (entry is not None and entry[1] is slot.key and t.is_cpu and
              t.dtype is slot.dtype and t.shape == slot.shape and
              t.is_contiguous()):
            handles.append(entry[0])
            continue
        handles.append(self._handle(lane, slot, t, copies))
      # Still under the lock: the lane's structs are shared.
      return self._tensors(lane, lane.execute(handles), keep, self._plan)
    finally:
      self._busy.release()
      for copy in copies:
        if isinstance(copy, int):
          lane.destroy(copy)

  def _tensors(self, lane: _Lane, outputs: list[int],
               keep: Sequence[bool] | None, plan: list) -> list[Any]:
    """The outputs as tensors over their buffers' memory (a step can have
    dozens, e.g. the activations a forward pass saves: inline), but the
    raw handles of those `keep` marks."""
    tensors = []
    pointer_fn, pointer_args, pointer_address = lane.pointer_call
    produced = _produced
    ndarray = np.ndarray
    from_numpy = torch.from_numpy
    try:
      for handle, (owner_type, key, shape, np_dtype, view_dtype), kept in (
          zip(outputs, plan, keep or _KEEP_NONE)):
        if kept:
          tensors.append(handle)
          continue
        if owner_type is None:  # No elements.
          lane.destroy(handle)
          tensors.append(torch.empty(shape, dtype=key[0]))
          continue
        pointer_args.buffer = handle
        error = pointer_fn(pointer_address)
        if error:
          lane.destroy(handle)
          lane.raise_error(error)
        pointer = pointer_args.buffer_pointer
        owner = owner_type.from_address(pointer)
        # From here on the owner destroys the buffer.
        owner.rec = rec = (handle, key, pointer, lane)
        t = from_numpy(ndarray(shape, np_dtype, owner))
        if view_dtype is not None:
          t = t.view(view_dtype)
        produced[pointer] = rec
        tensors.append(t)
    except BaseException:
      for handle in outputs[len(tensors) + 1:]:
        lane.destroy(handle)
      for value in tensors:
        if type(value) is int:  # pylint: disable=unidiomatic-typecheck
          lane.destroy(value)  # A kept output nobody owns yet.
      raise
    return tensors

  def _copying(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    c = self._client
    outputs = self._exe.execute([c.buffer_from_numpy(_to_numpy(t))
                                 for t in inputs])
    return [_from_numpy(_writeable(o.to_numpy())) for o in outputs]

  def _handle(self, lane: _Lane, slot: _Slot, t: torch.Tensor,
              copies: list[int]) -> int:
    if t.dtype is not slot.dtype or not t.is_cpu or t.shape != slot.shape:
      # Not what the program takes: the plugin says why.
      buffer = self._client.buffer_from_numpy(_to_numpy(t))
      copies.append(buffer)  # A Buffer object: alive until the call ends.
      return buffer.handle
    if not t.is_contiguous():
      t = t.contiguous()
    pointer = t.data_ptr()
    entry = _produced.get(pointer)
    if entry is not None and entry[1] is slot.key:
      # The whole of a program's output (same start, type and shape).
      return entry[0]
    last = slot.last
    if (last is not None and last() is t and pointer and
        pointer % _VIEW_ALIGNMENT == 0):
      # The same tensor as last time: a weight. View it from now on.
      slot.view = None  # The old view goes before its tensor.
      slot.view_of = None
      slot.view = lane.view(pointer, slot.element_type, tuple(slot.shape))
      slot.view_handle = slot.view.handle
      slot.view_of, slot.view_pointer = t, pointer
      return slot.view_handle
    try:
      slot.last = weakref.ref(t)
    except TypeError:
      slot.last = None
    if slot.stage_handle:
      ctypes.memmove(slot.stage_address, pointer, slot.nbytes)
      return slot.stage_handle
    if 0 < slot.nbytes <= _STAGE_MAX_BYTES:
      # A new tensor (a tangent, a batch): copied into memory of the
      # slot's own under a view made once, rather than into a buffer made
      # and destroyed per call. The call holds the lane, so one call at a
      # time uses the memory.
      stage = _aligned_empty(slot.nbytes, np.uint8)
      view = lane.view(stage.ctypes.data, slot.element_type,
                       tuple(slot.shape))
      slot.stage = (stage, view)
      slot.stage_address, slot.stage_handle = stage.ctypes.data, view.handle
      ctypes.memmove(slot.stage_address, pointer, slot.nbytes)
      return slot.stage_handle
    handle = lane.upload(pointer, slot.element_type, slot.dims, slot.rank)
    copies.append(handle)
    return handle

