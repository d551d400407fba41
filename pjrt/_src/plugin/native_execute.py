"""A native PJRT_LoadedExecutable_Execute for the common call.

Through Python, an execution costs about 25 microseconds of plugin work
(the callback into the interpreter, the handle lookups, a Buffer object and
a handle per output, the backend's call), against a few for the program of
a small training step. This module answers the common call natively,
without the GIL, and hands every other call to the Python implementation:

  * one device, the executable's own; no send / recv callbacks, and no
    non-donatable indices for an executable that donates;
  * an executable with a *descriptor*: a backend plan for one native call
    of the whole program (backends.Compiled.native_plan) and a latest run
    short enough to run inline (the descriptor is *armed* only then, see
    executables.LoadedExecutable);
  * every argument a live buffer record (handles.py) that is ready, on the
    executable's device, of the parameter's element type and dimensions
    (its shape key, native_slots.shape_key); a donated one passed once and
    read by no other native execution.

Donation. A donated argument's state moves from ready to deleted with a
compare-and-swap before the program runs (a concurrent reader then falls
back to Python), and its hold must be the only one. Where the plan lets
its memory stand in for a result (NativePlan.donate_to) and native code
owns it, the result is written in place and the memory moves to the
result's record; a Python-owned buffer is only marked deleted (its Buffer
reads the mark, runtime.Buffer._deleted) and its result gets fresh memory.

It takes a *hold* on each argument (an atomic count in its record) while
the program runs; Python waits for the holds to drop before it lets go of
a buffer's data (handles.HandleTable.retire). It allocates each output
with aligned_alloc, runs the plan, and makes each output a buffer record
of its own in the native range of the handle table, owned by native code:
its state, device, memory, element type, data address and shape key are
in the record, so the native query slots (native_slots.py), a later
native Execute and the native Buffer_Destroy below use it without Python.
Any other slot that is handed such a buffer *adopts* it: the table asks
`_adopt` for a Python Buffer over the same memory (freed when that Buffer
lets go of it) and the record becomes an ordinary Python-owned handle.
Completion events are the shared ready event: the program has run when
Execute returns.

Native records come from a bump pointer over the native range and a ring
of freed records that are reused only after `QUARANTINE` later frees, as
handles.py does for its own.

When a fast path's guard fails after holds were taken or memory was
allocated, everything is given back (donated arguments become ready
again) and the call goes to Python, which runs it from the start: every
such failure happens before the program runs.
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from typing import Any, Optional

import numpy as np

import support
from pjrt._src import abi
from pjrt._src import abi_types
from pjrt._src import dtypes
from pjrt._src.plugin import handles
from pjrt._src.plugin import native
from pjrt._src.plugin import native_slots
from pjrt._src.plugin import runtime

LOADED_EXECUTABLE = "PJRT_LoadedExecutable"
DEVICE = "PJRT_Device"
SLOTS = ("LoadedExecutable_Execute", "Buffer_Destroy",
         "Buffer_IncreaseExternalReferenceCount",
         "Buffer_DecreaseExternalReferenceCount",
         "Client_BufferFromHostBuffer")
QUARANTINE = 1 << 16

# Descriptor words.
(ARMED, NUM_PARAMS, NUM_OUTPUTS, DEVICE_HANDLE, MEMORY_HANDLE, PARAM_KEYS,
 OUTPUTS, PLAN, ENTRY, ALLOC, FREE, DONATE, DONATES, PARAM_INFO) = range(14)
# PARAM_INFO, per parameter: element type, rank, dims address (for an
# argument whose shape key is 0: a buffer made by the native transfer).
DESCRIPTOR_WORDS = 16
# Words per output in OUTPUTS: shape key, bytes to allocate, element type,
# dims address, rank, bytes of data.
OUTPUT_WORDS = 6
# DONATE, per parameter: the result its memory becomes (>= 0), or
NOT_DONATED = -2
DONATED = -1  # donated (deleted by the call), its memory not reused

# Allocator words.
(_LOCK, _NEXT, _END, _HEAD, _TAIL, _MASK, _RING, _QUARANTINE,
 _OWNER_LOCK) = range(9)
_ALLOCATOR_WORDS = 16

# Buffer record word indices, and byte offsets.
_WORD = {name: native_slots.word(native_slots.BUFFER_WORDS, name)
         for name in native_slots.BUFFER_WORDS}
_W = {name: 8 * index for name, index in _WORD.items()}

_LIBC = ctypes.CDLL(None)
_LIBC.free.argtypes = [ctypes.c_void_p]
_LIBC.free.restype = None
_LIBC.aligned_alloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
_LIBC.aligned_alloc.restype = ctypes.c_void_p
_ALIGNED_ALLOC = ctypes.cast(_LIBC.aligned_alloc, ctypes.c_void_p).value
_FREE = ctypes.cast(_LIBC.free, ctypes.c_void_p).value

_lock = threading.Lock()
_state: dict[str, Any] = {}
# Descriptor address -> Descriptor (kept: native buffers name theirs).
_DESCRIPTORS: dict[int, "Descriptor"] = {}


def _offset(slot: str, field: str) -> int:
  return getattr(abi.args_type(slot), field).offset


def _helpers_ir(region: tuple[int, int]) -> str:
  start, end = region
  return f"""
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)

define internal i1 @is_record(i64 %h, i64 %tag) {{
entry:
  %rel = sub i64 %h, {start}
  %inside = icmp ult i64 %rel, {end - start}
  %low = and i64 %rel, {handles.RECORD_SIZE - 1}
  %aligned = icmp eq i64 %low, 0
  %ok = and i1 %inside, %aligned
  br i1 %ok, label %check, label %no
check:
  %p = inttoptr i64 %h to ptr
  %tp = getelementptr i8, ptr %p, i64 8
  %t = load atomic i64, ptr %tp acquire, align 8
  %same = icmp eq i64 %t, %tag
  ret i1 %same
no:
  ret i1 false
}}

define internal i64 @at(ptr %p, i64 %i) {{
  %q = getelementptr i64, ptr %p, i64 %i
  %v = load i64, ptr %q
  ret i64 %v
}}

define internal void @put(ptr %p, i64 %i, i64 %v) {{
  %q = getelementptr i64, ptr %p, i64 %i
  store i64 %v, ptr %q
  ret void
}}

define internal void @spin_lock(ptr %w) {{
entry:
  br label %try
try:
  %r = cmpxchg ptr %w, i64 0, i64 1 acquire monotonic
  %ok = extractvalue {{ i64, i1 }} %r, 1
  br i1 %ok, label %done, label %try
done:
  ret void
}}

define internal void @spin_unlock(ptr %w) {{
  store atomic i64 0, ptr %w release, align 8
  ret void
}}

define i64 @native_record_alloc(ptr %a) {{
entry:
  call void @spin_lock(ptr %a)
  %head = call i64 @at(ptr %a, i64 {_HEAD})
  %tail = call i64 @at(ptr %a, i64 {_TAIL})
  %queued = sub i64 %tail, %head
  %quarantine = call i64 @at(ptr %a, i64 {_QUARANTINE})
  %reuse = icmp ugt i64 %queued, %quarantine
  br i1 %reuse, label %pop, label %bump
pop:
  %mask = call i64 @at(ptr %a, i64 {_MASK})
  %ring = call i64 @at(ptr %a, i64 {_RING})
  %ringp = inttoptr i64 %ring to ptr
  %idx = and i64 %head, %mask
  %old = call i64 @at(ptr %ringp, i64 %idx)
  %head1 = add i64 %head, 1
  call void @put(ptr %a, i64 {_HEAD}, i64 %head1)
  br label %out
bump:
  %next = call i64 @at(ptr %a, i64 {_NEXT})
  %end = call i64 @at(ptr %a, i64 {_END})
  %room = icmp ult i64 %next, %end
  br i1 %room, label %take, label %out
take:
  %next1 = add i64 %next, {handles.RECORD_SIZE}
  call void @put(ptr %a, i64 {_NEXT}, i64 %next1)
  br label %out
out:
  %r = phi i64 [ %old, %pop ], [ %next, %take ], [ 0, %bump ]
  call void @spin_unlock(ptr %a)
  ret i64 %r
}}

define void @native_record_release(ptr %a, i64 %record) {{
  call void @spin_lock(ptr %a)
  %tail = call i64 @at(ptr %a, i64 {_TAIL})
  %mask = call i64 @at(ptr %a, i64 {_MASK})
  %ring = call i64 @at(ptr %a, i64 {_RING})
  %ringp = inttoptr i64 %ring to ptr
  %idx = and i64 %tail, %mask
  call void @put(ptr %ringp, i64 %idx, i64 %record)
  %tail1 = add i64 %tail, 1
  call void @put(ptr %a, i64 {_TAIL}, i64 %tail1)
  call void @spin_unlock(ptr %a)
  ret void
}}

define void @native_account(ptr %stats, i64 %bytes, i64 %allocs) {{
entry:
  %old = atomicrmw add ptr %stats, i64 %bytes seq_cst
  %now = add i64 %old, %bytes
  %peakp = getelementptr i64, ptr %stats, i64 1
  br label %peak
peak:
  %seen = load atomic i64, ptr %peakp seq_cst, align 8
  %higher = icmp sgt i64 %now, %seen
  br i1 %higher, label %raise, label %count
raise:
  %cx = cmpxchg ptr %peakp, i64 %seen, i64 %now seq_cst seq_cst
  %won = extractvalue {{ i64, i1 }} %cx, 1
  br i1 %won, label %count, label %peak
count:
  %allocp = getelementptr i64, ptr %stats, i64 2
  %prev = atomicrmw add ptr %allocp, i64 %allocs seq_cst
  ret void
}}

define internal void @device_account(i64 %dev, i64 %bytes, i64 %allocs) {{
entry:
  %live = call i1 @is_record(i64 %dev, i64 {handles.tag(DEVICE)})
  br i1 %live, label %stats, label %done
stats:
  %devp = inttoptr i64 %dev to ptr
  %s = call i64 @at(ptr %devp, i64 {native_slots.word(native_slots.DEVICE_WORDS, "stats")})
  %has = icmp ne i64 %s, 0
  br i1 %has, label %add, label %done
add:
  %sp = inttoptr i64 %s to ptr
  call void @native_account(ptr %sp, i64 %bytes, i64 %allocs)
  br label %done
done:
  ret void
}}

define void @native_buffer_retire(i64 %record, i64 %state) {{
entry:
  %p = inttoptr i64 %record to ptr
  %sp = getelementptr i8, ptr %p, i64 {_W["state"]}
  %old = atomicrmw xchg ptr %sp, i64 %state seq_cst
  %hp = getelementptr i8, ptr %p, i64 {_W["holds"]}
  br label %wait
wait:
  %holds = load atomic i64, ptr %hp seq_cst, align 8
  %free = icmp eq i64 %holds, 0
  br i1 %free, label %done, label %wait
done:
  ret void
}}
"""


def _slot_ir(slot: str, fallback: int, required: int, body: str) -> str:
  """The fast path `fast_<slot>(args)`: the guards every slot shares (args
  not NULL, struct_size at least `required`), then `body` from label %a2
  on, which returns 0 or branches to %slow: the slot's regular entry,
  `fallback`, called with the same args."""
  return f"""
define i64 @fast_{slot}(i64 %args) {{
entry:
  %ap = inttoptr i64 %args to ptr
  %nonnull = icmp ne i64 %args, 0
  br i1 %nonnull, label %a1, label %slow
a1:
  %size = call i64 @at(ptr %ap, i64 0)
  %big = icmp uge i64 %size, {required}
  br i1 %big, label %a2, label %slow
a2:
{body}
slow:
  %fallback = inttoptr i64 {fallback} to ptr
  %res = tail call i64 %fallback(i64 %args)
  ret i64 %res
}}
"""


def _execute_ir(fallback: int, required: int, allocator: int,
                ready_event: int) -> str:
  slot = "LoadedExecutable_Execute"
  o = {f: _offset(slot, f) for f in (
      "executable", "options", "argument_lists", "num_devices", "num_args",
      "output_lists", "device_complete_events", "execute_device")}
  keep = abi.PJRT_ExecuteOptions.num_non_donatable_input_indices.offset
  opt_min = keep + 8
  send = abi.PJRT_ExecuteOptions.num_send_ops.offset
  recv = abi.PJRT_ExecuteOptions.num_recv_ops.offset
  buffer_tag = handles.tag(runtime.BUFFER)
  w = _WORD
  body = f"""
  %exe = call i64 @at(ptr %ap, i64 {o["executable"] // 8})
  %exe_ok = call i1 @is_record(i64 %exe, i64 {handles.tag(LOADED_EXECUTABLE)})
  br i1 %exe_ok, label %a3, label %slow
a3:
  %exep = inttoptr i64 %exe to ptr
  %d = call i64 @at(ptr %exep, i64 2)
  %d_ok = icmp ne i64 %d, 0
  br i1 %d_ok, label %a4, label %slow
a4:
  %dp = inttoptr i64 %d to ptr
  %armed = call i64 @at(ptr %dp, i64 {ARMED})
  %ndev = call i64 @at(ptr %ap, i64 {o["num_devices"] // 8})
  %n = call i64 @at(ptr %dp, i64 {NUM_PARAMS})
  %nargs = call i64 @at(ptr %ap, i64 {o["num_args"] // 8})
  %dev = call i64 @at(ptr %dp, i64 {DEVICE_HANDLE})
  %ed = call i64 @at(ptr %ap, i64 {o["execute_device"] // 8})
  %olists = call i64 @at(ptr %ap, i64 {o["output_lists"] // 8})
  %c1 = icmp ne i64 %armed, 0
  %c2 = icmp eq i64 %ndev, 1
  %c3 = icmp eq i64 %n, %nargs
  %ed0 = icmp eq i64 %ed, 0
  %edd = icmp eq i64 %ed, %dev
  %c4 = or i1 %ed0, %edd
  %c5 = icmp ne i64 %olists, 0
  %c12 = and i1 %c1, %c2
  %c34 = and i1 %c3, %c4
  %c125 = and i1 %c12, %c5
  %call = and i1 %c125, %c34
  br i1 %call, label %a5, label %slow
a5:
  %dev_ok = call i1 @is_record(i64 %dev, i64 {handles.tag(DEVICE)})
  br i1 %dev_ok, label %a6, label %slow
a6:
  %opt = call i64 @at(ptr %ap, i64 {o["options"] // 8})
  %noopt = icmp eq i64 %opt, 0
  br i1 %noopt, label %a8, label %a7
a7:
  %optp = inttoptr i64 %opt to ptr
  %osize = call i64 @at(ptr %optp, i64 0)
  %nsend = call i64 @at(ptr %optp, i64 {send // 8})
  %nrecv = call i64 @at(ptr %optp, i64 {recv // 8})
  %o1 = icmp uge i64 %osize, {opt_min}
  %o2 = icmp eq i64 %nsend, 0
  %o3 = icmp eq i64 %nrecv, 0
  %nkeep = call i64 @at(ptr %optp, i64 {keep // 8})
  %donates = call i64 @at(ptr %dp, i64 {DONATES})
  %o4a = icmp eq i64 %nkeep, 0
  %o4b = icmp eq i64 %donates, 0
  %o4 = or i1 %o4a, %o4b
  %o12 = and i1 %o1, %o2
  %o34 = and i1 %o3, %o4
  %oall = and i1 %o12, %o34
  br i1 %oall, label %a8, label %slow
a8:
  %olp = inttoptr i64 %olists to ptr
  %outer = call i64 @at(ptr %olp, i64 0)
  %outer_ok = icmp ne i64 %outer, 0
  br i1 %outer_ok, label %a9, label %slow
a9:
  %hasargs = icmp ne i64 %n, 0
  br i1 %hasargs, label %a10, label %a12
a10:
  %alists = call i64 @at(ptr %ap, i64 {o["argument_lists"] // 8})
  %alists_ok = icmp ne i64 %alists, 0
  br i1 %alists_ok, label %a11, label %slow
a11:
  %alp = inttoptr i64 %alists to ptr
  %inner0 = call i64 @at(ptr %alp, i64 0)
  %inner_ok = icmp ne i64 %inner0, 0
  br i1 %inner_ok, label %a12, label %slow
a12:
  %inner = phi i64 [ 0, %a9 ], [ %inner0, %a11 ]
  %innerp = inttoptr i64 %inner to ptr
  %m = call i64 @at(ptr %dp, i64 {NUM_OUTPUTS})
  %n1 = add i64 %n, 1
  %m1 = add i64 %m, 1
  %argv = alloca i64, i64 %n1, align 16
  %outv = alloca i64, i64 %m1, align 16
  %recv = alloca i64, i64 %m1, align 16
  %reusev = alloca i64, i64 %m1, align 16
  %reuse_bytes = shl i64 %m1, 3
  call void @llvm.memset.p0.i64(ptr %reusev, i8 0, i64 %reuse_bytes, i1 false)
  %keys = call i64 @at(ptr %dp, i64 {PARAM_KEYS})
  %keysp = inttoptr i64 %keys to ptr
  %donate = call i64 @at(ptr %dp, i64 {DONATE})
  %donatep = inttoptr i64 %donate to ptr
  %info = call i64 @at(ptr %dp, i64 {PARAM_INFO})
  %infop = inttoptr i64 %info to ptr
  br label %hloop

hloop:
  %i = phi i64 [ 0, %a12 ], [ %i1, %hnext ]
  %hmore = icmp ult i64 %i, %n
  br i1 %hmore, label %hbody, label %alloc
hbody:
  %h = call i64 @at(ptr %innerp, i64 %i)
  %h_ok = call i1 @is_record(i64 %h, i64 {buffer_tag})
  br i1 %h_ok, label %hhold, label %unhold
hhold:
  %hp = inttoptr i64 %h to ptr
  %holdp = getelementptr i64, ptr %hp, i64 {w["holds"]}
  %prev = atomicrmw add ptr %holdp, i64 1 seq_cst
  %statep = getelementptr i64, ptr %hp, i64 {w["state"]}
  %hdev = call i64 @at(ptr %hp, i64 {w["device"]})
  %hkey = call i64 @at(ptr %hp, i64 {w["shape_key"]})
  %want = call i64 @at(ptr %keysp, i64 %i)
  %dk = call i64 @at(ptr %donatep, i64 %i)
  %dv_ok = icmp eq i64 %hdev, %dev
  %k_ok = call i1 @same_shape(ptr %hp, ptr %infop, i64 %i, i64 %want)
  %typed = and i1 %dv_ok, %k_ok
  %i1 = add i64 %i, 1
  %isdon = icmp ne i64 %dk, {NOT_DONATED}
  br i1 %isdon, label %dclaim, label %dplain
dplain:
  %state = load atomic i64, ptr %statep seq_cst, align 8
  %s_ok = icmp eq i64 %state, {native_slots.BUFFER_READY}
  %usable = and i1 %s_ok, %typed
  br i1 %usable, label %hnext, label %unhold
dclaim:
  %cx = cmpxchg ptr %statep, i64 {native_slots.BUFFER_READY}, i64 {native_slots.BUFFER_DELETED} seq_cst seq_cst
  %claimed = extractvalue {{ i64, i1 }} %cx, 1
  br i1 %claimed, label %dcheck, label %unhold
dcheck:
  %hnow = load atomic i64, ptr %holdp seq_cst, align 8
  %alone = icmp eq i64 %hnow, 1
  %dusable = and i1 %alone, %typed
  br i1 %dusable, label %downer, label %drestore
drestore:
  store atomic i64 {native_slots.BUFFER_READY}, ptr %statep seq_cst, align 8
  br label %unhold
downer:
  %owner = call i64 @at(ptr %hp, i64 {w["owner"]})
  %native_owned = icmp eq i64 %owner, {native_slots.OWNER_NATIVE}
  %has_result = icmp sge i64 %dk, 0
  %reuse_it = and i1 %native_owned, %has_result
  br i1 %reuse_it, label %dreuse, label %hnext
dreuse:
  call void @put(ptr %reusev, i64 %dk, i64 %i1)
  br label %hnext
hnext:
  %data = call i64 @at(ptr %hp, i64 {w["data"]})
  call void @put(ptr %argv, i64 %i, i64 %data)
  br label %hloop

unhold:
  %held = phi i64 [ %i, %hbody ], [ %i1, %dplain ], [ %i1, %dclaim ], [ %i1, %drestore ]
  call void @release_holds(ptr %innerp, ptr %donatep, i64 %held, i64 %i)
  br label %slow

alloc:
  %outs = call i64 @at(ptr %dp, i64 {OUTPUTS})
  %outsp = inttoptr i64 %outs to ptr
  %allocf = call i64 @at(ptr %dp, i64 {ALLOC})
  %allocfp = inttoptr i64 %allocf to ptr
  br label %oloop
oloop:
  %k = phi i64 [ 0, %alloc ], [ %k1, %onext ], [ %k1, %oreused ]
  %omore = icmp ult i64 %k, %m
  br i1 %omore, label %obody, label %records
obody:
  %k1 = add i64 %k, 1
  %from = call i64 @at(ptr %reusev, i64 %k)
  %reused = icmp ne i64 %from, 0
  br i1 %reused, label %oreused, label %ofresh
oreused:
  %from0 = sub i64 %from, 1
  %donor = call i64 @at(ptr %argv, i64 %from0)
  call void @put(ptr %outv, i64 %k, i64 %donor)
  br label %oloop
ofresh:
  %kb = mul i64 %k, {OUTPUT_WORDS}
  %kb1 = add i64 %kb, 1
  %bytes = call i64 @at(ptr %outsp, i64 %kb1)
  %mem = call i64 %allocfp(i64 64, i64 %bytes)
  %mem_ok = icmp ne i64 %mem, 0
  br i1 %mem_ok, label %onext, label %nomem
onext:
  call void @put(ptr %outv, i64 %k, i64 %mem)
  br label %oloop
nomem:
  call void @free_outputs(ptr %dp, ptr %outv, ptr %reusev, i64 %k)
  call void @release_holds(ptr %innerp, ptr %donatep, i64 %n, i64 %n)
  br label %slow

records:
  br label %rloop
rloop:
  %r = phi i64 [ 0, %records ], [ %r1, %rnext ]
  %rmore = icmp ult i64 %r, %m
  br i1 %rmore, label %rbody, label %run
rbody:
  %rec = call i64 @native_record_alloc(ptr inttoptr (i64 {allocator} to ptr))
  %r1 = add i64 %r, 1
  %rec_ok = icmp ne i64 %rec, 0
  br i1 %rec_ok, label %rnext, label %norecord
rnext:
  call void @put(ptr %recv, i64 %r, i64 %rec)
  br label %rloop
norecord:
  call void @release_records(ptr %recv, i64 %r)
  call void @free_outputs(ptr %dp, ptr %outv, ptr %reusev, i64 %m)
  call void @release_holds(ptr %innerp, ptr %donatep, i64 %n, i64 %n)
  br label %slow

run:
  %plan = call i64 @at(ptr %dp, i64 {PLAN})
  %planp = inttoptr i64 %plan to ptr
  %entryf = call i64 @at(ptr %dp, i64 {ENTRY})
  %entryp = inttoptr i64 %entryf to ptr
  %status = call i32 %entryp(ptr %planp, ptr %argv, ptr %outv)
  %ran = icmp eq i32 %status, 0
  br i1 %ran, label %moved, label %failed
failed:
  call void @release_records(ptr %recv, i64 %m)
  call void @free_outputs(ptr %dp, ptr %outv, ptr %reusev, i64 %m)
  call void @release_holds(ptr %innerp, ptr %donatep, i64 %n, i64 %n)
  br label %slow

moved:
  br label %mloop
mloop:
  %u = phi i64 [ 0, %moved ], [ %u1, %mnext ], [ %u1, %mbody ]
  %umore = icmp ult i64 %u, %m
  br i1 %umore, label %mbody, label %ran_ok
mbody:
  %u1 = add i64 %u, 1
  %ufrom = call i64 @at(ptr %reusev, i64 %u)
  %was_reused = icmp ne i64 %ufrom, 0
  br i1 %was_reused, label %mnext, label %mloop
mnext:
  %ufrom0 = sub i64 %ufrom, 1
  %uh = call i64 @at(ptr %innerp, i64 %ufrom0)
  %uhp = inttoptr i64 %uh to ptr
  call void @put(ptr %uhp, i64 {w["data"]}, i64 0)
  %ubytes = call i64 @at(ptr %uhp, i64 {w["nbytes"]})
  %uneg = sub i64 0, %ubytes
  call void @device_account(i64 %dev, i64 %uneg, i64 0)
  br label %mloop
ran_ok:
  call void @release_holds(ptr %innerp, ptr %donatep, i64 %n, i64 0)
  br label %publish

publish:
  %memory = call i64 @at(ptr %dp, i64 {MEMORY_HANDLE})
  %outerp = inttoptr i64 %outer to ptr
  br label %ploop
ploop:
  %q = phi i64 [ 0, %publish ], [ %q1, %pbody ]
  %pmore = icmp ult i64 %q, %m
  br i1 %pmore, label %pbody, label %events
pbody:
  %qr = call i64 @at(ptr %recv, i64 %q)
  %qp = inttoptr i64 %qr to ptr
  %qb = mul i64 %q, {OUTPUT_WORDS}
  %qkey = call i64 @at(ptr %outsp, i64 %qb)
  %qb2 = add i64 %qb, 2
  %qtype = call i64 @at(ptr %outsp, i64 %qb2)
  %qdata = call i64 @at(ptr %outv, i64 %q)
  %qb3 = add i64 %qb, 3
  %qdims = call i64 @at(ptr %outsp, i64 %qb3)
  %qb4 = add i64 %qb, 4
  %qrank = call i64 @at(ptr %outsp, i64 %qb4)
  %qb5 = add i64 %qb, 5
  %qbytes = call i64 @at(ptr %outsp, i64 %qb5)
  call void @put(ptr %qp, i64 0, i64 0)
  call void @put(ptr %qp, i64 {w["state"]}, i64 {native_slots.BUFFER_READY})
  call void @put(ptr %qp, i64 {w["device"]}, i64 %dev)
  call void @put(ptr %qp, i64 {w["memory"]}, i64 %memory)
  call void @put(ptr %qp, i64 {w["element_type"]}, i64 %qtype)
  call void @put(ptr %qp, i64 {w["data"]}, i64 %qdata)
  call void @put(ptr %qp, i64 {w["shape_key"]}, i64 %qkey)
  call void @put(ptr %qp, i64 {w["holds"]}, i64 0)
  call void @put(ptr %qp, i64 {w["owner"]}, i64 {native_slots.OWNER_NATIVE})
  call void @put(ptr %qp, i64 {w["descriptor"]}, i64 %d)
  call void @put(ptr %qp, i64 {w["output"]}, i64 %q)
  call void @put(ptr %qp, i64 {w["dims"]}, i64 %qdims)
  call void @put(ptr %qp, i64 {w["rank"]}, i64 %qrank)
  call void @put(ptr %qp, i64 {w["nbytes"]}, i64 %qbytes)
  call void @put(ptr %qp, i64 {w["external_refs"]}, i64 0)
  %tagp = getelementptr i64, ptr %qp, i64 {handles.TAG_WORD}
  store atomic i64 {buffer_tag}, ptr %tagp release, align 8
  call void @put(ptr %outerp, i64 %q, i64 %qr)
  call void @device_account(i64 %dev, i64 %qbytes, i64 1)
  %q1 = add i64 %q, 1
  br label %ploop

events:
  %evs = call i64 @at(ptr %ap, i64 {o["device_complete_events"] // 8})
  %has_evs = icmp ne i64 %evs, 0
  br i1 %has_evs, label %setev, label %done
setev:
  %evsp = inttoptr i64 %evs to ptr
  call void @put(ptr %evsp, i64 0, i64 {ready_event})
  br label %done
done:
  ret i64 0
"""
  return _slot_ir(slot, fallback, required, body) + f"""
define internal i1 @same_shape(ptr %hp, ptr %info, i64 %i, i64 %want) {{
entry:
  %hkey = call i64 @at(ptr %hp, i64 {w["shape_key"]})
  %eq = icmp eq i64 %hkey, %want
  br i1 %eq, label %yes, label %unkeyed
unkeyed:
  %zero = icmp eq i64 %hkey, 0
  br i1 %zero, label %compare, label %no
compare:
  %b0 = mul i64 %i, 3
  %ptype = call i64 @at(ptr %info, i64 %b0)
  %b1 = add i64 %b0, 1
  %prank = call i64 @at(ptr %info, i64 %b1)
  %b2 = add i64 %b0, 2
  %pdims = call i64 @at(ptr %info, i64 %b2)
  %htype = call i64 @at(ptr %hp, i64 {w["element_type"]})
  %hrank = call i64 @at(ptr %hp, i64 {w["rank"]})
  %hdims = call i64 @at(ptr %hp, i64 {w["dims"]})
  %t_eq = icmp eq i64 %ptype, %htype
  %r_eq = icmp eq i64 %prank, %hrank
  %d_ok = icmp ne i64 %hdims, 0
  %tr = and i1 %t_eq, %r_eq
  %trd = and i1 %tr, %d_ok
  br i1 %trd, label %loop, label %no
loop:
  %j = phi i64 [ 0, %compare ], [ %j1, %next ]
  %more = icmp ult i64 %j, %prank
  br i1 %more, label %next, label %yes
next:
  %pdp = inttoptr i64 %pdims to ptr
  %hdp = inttoptr i64 %hdims to ptr
  %pd = call i64 @at(ptr %pdp, i64 %j)
  %hd = call i64 @at(ptr %hdp, i64 %j)
  %j1 = add i64 %j, 1
  %same = icmp eq i64 %pd, %hd
  br i1 %same, label %loop, label %no
yes:
  ret i1 true
no:
  ret i1 false
}}

define internal void @release_holds(ptr %innerp, ptr %donatep, i64 %count,
                                    i64 %claimed) {{
entry:
  br label %loop
loop:
  %j = phi i64 [ 0, %entry ], [ %j1, %release ]
  %more = icmp ult i64 %j, %count
  br i1 %more, label %body, label %done
body:
  %h = call i64 @at(ptr %innerp, i64 %j)
  %hp = inttoptr i64 %h to ptr
  %j1 = add i64 %j, 1
  %was_claimed = icmp ult i64 %j, %claimed
  %dk = call i64 @at(ptr %donatep, i64 %j)
  %donated = icmp ne i64 %dk, {NOT_DONATED}
  %restore = and i1 %was_claimed, %donated
  br i1 %restore, label %ready, label %release
ready:
  %statep = getelementptr i64, ptr %hp, i64 {w["state"]}
  store atomic i64 {native_slots.BUFFER_READY}, ptr %statep seq_cst, align 8
  br label %release
release:
  %holdp = getelementptr i64, ptr %hp, i64 {w["holds"]}
  %old = atomicrmw sub ptr %holdp, i64 1 seq_cst
  br label %loop
done:
  ret void
}}

define internal void @free_outputs(ptr %dp, ptr %outv, ptr %reusev,
                                   i64 %count) {{
entry:
  %freef = call i64 @at(ptr %dp, i64 {FREE})
  %freep = inttoptr i64 %freef to ptr
  br label %loop
loop:
  %j = phi i64 [ 0, %entry ], [ %j1, %body ], [ %j1, %free ]
  %more = icmp ult i64 %j, %count
  br i1 %more, label %body, label %done
body:
  %j1 = add i64 %j, 1
  %from = call i64 @at(ptr %reusev, i64 %j)
  %own = icmp eq i64 %from, 0
  br i1 %own, label %free, label %loop
free:
  %mem = call i64 @at(ptr %outv, i64 %j)
  call void %freep(i64 %mem)
  br label %loop
done:
  ret void
}}

define internal void @release_records(ptr %recv, i64 %count) {{
entry:
  br label %loop
loop:
  %j = phi i64 [ 0, %entry ], [ %j1, %body ]
  %more = icmp ult i64 %j, %count
  br i1 %more, label %body, label %done
body:
  %rec = call i64 @at(ptr %recv, i64 %j)
  call void @native_record_release(ptr inttoptr (i64 {allocator} to ptr), i64 %rec)
  %j1 = add i64 %j, 1
  br label %loop
done:
  ret void
}}
"""


def _owner_ir(allocator: int) -> str:
  """Functions that change a native-owned record's owner or external
  references under one spin lock (adoption takes it too, through
  `native_buffer_claim`)."""
  w = _WORD
  lock = f"ptr inttoptr (i64 {allocator + 8 * _OWNER_LOCK} to ptr)"
  native = native_slots.OWNER_NATIVE
  return f"""
define i64 @native_buffer_claim(i64 %h) {{
entry:
  %hp = inttoptr i64 %h to ptr
  call void @spin_lock({lock})
  %owner = call i64 @at(ptr %hp, i64 {w["owner"]})
  %mine = icmp eq i64 %owner, {native}
  br i1 %mine, label %claim, label %out
claim:
  call void @put(ptr %hp, i64 {w["owner"]}, i64 {native_slots.OWNER_PYTHON})
  %refs = call i64 @at(ptr %hp, i64 {w["external_refs"]})
  br label %out
out:
  %r = phi i64 [ -1, %entry ], [ %refs, %claim ]
  call void @spin_unlock({lock})
  ret i64 %r
}}

define internal i1 @take_for_destroy(ptr %hp) {{
entry:
  call void @spin_lock({lock})
  %owner = call i64 @at(ptr %hp, i64 {w["owner"]})
  %refs = call i64 @at(ptr %hp, i64 {w["external_refs"]})
  %mine = icmp eq i64 %owner, {native}
  %none = icmp eq i64 %refs, 0
  %ok = and i1 %mine, %none
  br i1 %ok, label %take, label %out
take:
  call void @put(ptr %hp, i64 {w["owner"]}, i64 {native_slots.OWNER_PYTHON})
  br label %out
out:
  call void @spin_unlock({lock})
  ret i1 %ok
}}

define internal i1 @add_reference(ptr %hp, i64 %delta) {{
entry:
  call void @spin_lock({lock})
  %owner = call i64 @at(ptr %hp, i64 {w["owner"]})
  %state = call i64 @at(ptr %hp, i64 {w["state"]})
  %refs = call i64 @at(ptr %hp, i64 {w["external_refs"]})
  %mine = icmp eq i64 %owner, {native}
  %up = icmp sgt i64 %delta, 0
  %ready = icmp eq i64 %state, {native_slots.BUFFER_READY}
  %some = icmp sgt i64 %refs, 0
  %allowed = select i1 %up, i1 %ready, i1 %some
  %ok = and i1 %mine, %allowed
  br i1 %ok, label %change, label %out
change:
  %refs1 = add i64 %refs, %delta
  call void @put(ptr %hp, i64 {w["external_refs"]}, i64 %refs1)
  br label %out
out:
  call void @spin_unlock({lock})
  ret i1 %ok
}}
"""


def _buffer_slot_ir(slot: str, fallback: int, required: int, body: str
                    ) -> str:
  """A fast path for a slot taking one buffer: guards, then `body` (with
  %h and %hp the buffer; it branches to %slow or returns 0)."""
  field = _offset(slot, "buffer") // 8
  return _slot_ir(slot, fallback, required, f"""
  %h = call i64 @at(ptr %ap, i64 {field})
  %ok = call i1 @is_record(i64 %h, i64 {handles.tag(runtime.BUFFER)})
  br i1 %ok, label %a3, label %slow
a3:
  %hp = inttoptr i64 %h to ptr
{body}
""")


def _destroy_ir(fallback: int, required: int, allocator: int) -> str:
  w = _WORD
  return _buffer_slot_ir("Buffer_Destroy", fallback, required, f"""
  %mine = call i1 @take_for_destroy(ptr %hp)
  br i1 %mine, label %a4, label %slow
a4:
  call void @native_buffer_retire(i64 %h, i64 {native_slots.BUFFER_DELETED})
  %tagp = getelementptr i64, ptr %hp, i64 {handles.TAG_WORD}
  store atomic i64 0, ptr %tagp release, align 8
  %data = call i64 @at(ptr %hp, i64 {w["data"]})
  %freep = inttoptr i64 {_FREE} to ptr
  call void %freep(i64 %data)
  %had_data = icmp ne i64 %data, 0
  br i1 %had_data, label %uncount, label %dims_check
uncount:
  %hdev = call i64 @at(ptr %hp, i64 {w["device"]})
  %hbytes = call i64 @at(ptr %hp, i64 {w["nbytes"]})
  %hneg = sub i64 0, %hbytes
  call void @device_account(i64 %hdev, i64 %hneg, i64 0)
  br label %dims_check
dims_check:
  %made_by = call i64 @at(ptr %hp, i64 {w["descriptor"]})
  %own_dims = icmp eq i64 %made_by, 0
  br i1 %own_dims, label %free_dims, label %release
free_dims:
  %dims = call i64 @at(ptr %hp, i64 {w["dims"]})
  call void %freep(i64 %dims)
  br label %release
release:
  call void @native_record_release(ptr inttoptr (i64 {allocator} to ptr), i64 %h)
  ret i64 0""")


def _reference_ir(slot: str, fallback: int, required: int, delta: int
                  ) -> str:
  return _buffer_slot_ir(slot, fallback, required, f"""
  %done = call i1 @add_reference(ptr %hp, i64 {delta})
  br i1 %done, label %counted, label %slow
counted:
  ret i64 0""")


def _element_sizes() -> Any:
  """Bytes per element by PJRT_Buffer_Type, 0 where the native transfer
  does not apply (unknown, token and sub-byte types)."""
  sizes = handles.immortal((ctypes.c_int64 * 64)())
  for t in abi_types.BufferType:
    if t.name in ("S4", "U4", "S2", "U2", "F4E2M1FN") or int(t) >= 64:
      continue
    try:
      sizes[int(t)] = dtypes.numpy_dtype(t).itemsize
    except support.XlaError:
      continue
  return sizes


def _host_buffer_ir(fallback: int, required: int, allocator: int,
                    ready_event: int, sizes: int) -> str:
  """Client_BufferFromHostBuffer for a dense row-major array of a known
  element type onto a device's default memory (no layout): a native-owned
  copy in a native record, whose dims are its own (freed with it)."""
  slot = "Client_BufferFromHostBuffer"
  o = {f: _offset(slot, f) // 8 for f in (
      "client", "data", "dims", "num_dims", "byte_strides",
      "num_byte_strides", "device", "memory", "device_layout",
      "done_with_host_buffer", "buffer")}
  type_offset = _offset(slot, "type")
  w = _WORD
  dw = {n: native_slots.word(native_slots.DEVICE_WORDS, n)
        for n in native_slots.DEVICE_WORDS}
  mw = {n: native_slots.word(native_slots.MEMORY_WORDS, n)
        for n in native_slots.MEMORY_WORDS}
  return _slot_ir(slot, fallback, required, f"""
  %client = call i64 @at(ptr %ap, i64 {o["client"]})
  %client_ok = call i1 @is_record(i64 %client, i64 {handles.tag("PJRT_Client")})
  %memory_arg = call i64 @at(ptr %ap, i64 {o["memory"]})
  %layout = call i64 @at(ptr %ap, i64 {o["device_layout"]})
  %no_layout = icmp eq i64 %layout, 0
  %b1 = and i1 %client_ok, %no_layout
  br i1 %b1, label %which, label %slow
which:
  %no_memory = icmp eq i64 %memory_arg, 0
  br i1 %no_memory, label %by_device, label %by_memory
by_memory:
  %mem_ok = call i1 @is_record(i64 %memory_arg, i64 {handles.tag(runtime.MEMORY)})
  %memrecp = inttoptr i64 %memory_arg to ptr
  %mdev = call i64 @at(ptr %memrecp, i64 {mw["device"]})
  br i1 %mem_ok, label %a3, label %slow
by_device:
  %ddev = call i64 @at(ptr %ap, i64 {o["device"]})
  br label %a3
a3:
  %dev = phi i64 [ %mdev, %by_memory ], [ %ddev, %by_device ]
  %dev_ok = call i1 @is_record(i64 %dev, i64 {handles.tag(DEVICE)})
  br i1 %dev_ok, label %a3b, label %slow
a3b:
  %devp = inttoptr i64 %dev to ptr
  %dev_client = call i64 @at(ptr %devp, i64 {dw["client"]})
  %default_memory = call i64 @at(ptr %devp, i64 {dw["default_memory"]})
  %memory = select i1 %no_memory, i64 %default_memory, i64 %memory_arg
  %same_client = icmp eq i64 %dev_client, %client
  %has_memory = icmp ne i64 %memory, 0
  %b3 = and i1 %same_client, %has_memory
  %tp = getelementptr i8, ptr %ap, i64 {type_offset}
  %type32 = load i32, ptr %tp
  %type = zext i32 %type32 to i64
  %known_type = icmp ult i64 %type, 64
  %b4 = and i1 %b3, %known_type
  br i1 %b4, label %a4, label %slow
a4:
  %itemsize = call i64 @at(ptr inttoptr (i64 {sizes} to ptr), i64 %type)
  %sized = icmp ne i64 %itemsize, 0
  %rank = call i64 @at(ptr %ap, i64 {o["num_dims"]})
  %small_rank = icmp ule i64 %rank, 32
  %b5 = and i1 %sized, %small_rank
  %dims = call i64 @at(ptr %ap, i64 {o["dims"]})
  %dimsp = inttoptr i64 %dims to ptr
  %scalar = icmp eq i64 %rank, 0
  %has_dims = icmp ne i64 %dims, 0
  %dims_ok = or i1 %scalar, %has_dims
  %b6 = and i1 %b5, %dims_ok
  br i1 %b6, label %count, label %slow
count:
  br label %cloop
cloop:
  %ci = phi i64 [ 0, %count ], [ %ci1, %cbody ]
  %elems = phi i64 [ 1, %count ], [ %elems1, %cbody ]
  %cmore = icmp ult i64 %ci, %rank
  br i1 %cmore, label %cnext, label %strides
cnext:
  %dim = call i64 @at(ptr %dimsp, i64 %ci)
  %nonneg = icmp sge i64 %dim, 0
  %modest = icmp slt i64 %dim, 1099511627776
  %dim_ok = and i1 %nonneg, %modest
  br i1 %dim_ok, label %cbody, label %slow
cbody:
  %elems1 = mul i64 %elems, %dim
  %ci1 = add i64 %ci, 1
  %fits = icmp slt i64 %elems1, 1099511627776
  br i1 %fits, label %cloop, label %slow
strides:
  %nbytes = mul i64 %elems, %itemsize
  %nstrides = call i64 @at(ptr %ap, i64 {o["num_byte_strides"]})
  %no_strides = icmp eq i64 %nstrides, 0
  br i1 %no_strides, label %copy, label %check_strides
check_strides:
  %same_rank = icmp eq i64 %nstrides, %rank
  %strides_ptr = call i64 @at(ptr %ap, i64 {o["byte_strides"]})
  %strides_nonnull = icmp ne i64 %strides_ptr, 0
  %s_ok = and i1 %same_rank, %strides_nonnull
  br i1 %s_ok, label %sloop_init, label %slow
sloop_init:
  %stridesp = inttoptr i64 %strides_ptr to ptr
  br label %sloop
sloop:
  %si = phi i64 [ %rank, %sloop_init ], [ %si_next, %sbody ]
  %expect = phi i64 [ %itemsize, %sloop_init ], [ %expect1, %sbody ]
  %smore = icmp ugt i64 %si, 0
  br i1 %smore, label %scheck, label %copy
scheck:
  %si_next = sub i64 %si, 1
  %stride = call i64 @at(ptr %stridesp, i64 %si_next)
  %sdim = call i64 @at(ptr %dimsp, i64 %si_next)
  %dense = icmp eq i64 %stride, %expect
  %unit = icmp ule i64 %sdim, 1
  %stride_ok = or i1 %dense, %unit
  br i1 %stride_ok, label %sbody, label %slow
sbody:
  %expect1 = mul i64 %expect, %sdim
  br label %sloop
copy:
  %data = call i64 @at(ptr %ap, i64 {o["data"]})
  %empty = icmp eq i64 %nbytes, 0
  %has_data = icmp ne i64 %data, 0
  %data_ok = or i1 %empty, %has_data
  br i1 %data_ok, label %alloc, label %slow
alloc:
  %alloc_f = inttoptr i64 {_ALIGNED_ALLOC} to ptr
  %free_f = inttoptr i64 {_FREE} to ptr
  %r63 = add i64 %nbytes, 63
  %rounded = and i64 %r63, -64
  %isz = icmp eq i64 %rounded, 0
  %bsize = select i1 %isz, i64 64, i64 %rounded
  %mem = call i64 %alloc_f(i64 64, i64 %bsize)
  %rank1 = add i64 %rank, 1
  %dbytes = shl i64 %rank1, 3
  %dcopy = call i64 %alloc_f(i64 8, i64 %dbytes)
  %rec = call i64 @native_record_alloc(ptr inttoptr (i64 {allocator} to ptr))
  %m_ok = icmp ne i64 %mem, 0
  %d_ok = icmp ne i64 %dcopy, 0
  %r_ok = icmp ne i64 %rec, 0
  %md = and i1 %m_ok, %d_ok
  %all = and i1 %md, %r_ok
  br i1 %all, label %fill, label %undo
undo:
  call void %free_f(i64 %mem)
  call void %free_f(i64 %dcopy)
  br i1 %r_ok, label %undo_rec, label %slow
undo_rec:
  call void @native_record_release(ptr inttoptr (i64 {allocator} to ptr), i64 %rec)
  br label %slow
fill:
  %memp = inttoptr i64 %mem to ptr
  %datap = inttoptr i64 %data to ptr
  br i1 %empty, label %dims_copy, label %do_copy
do_copy:
  call void @llvm.memcpy.p0.p0.i64(ptr %memp, ptr %datap, i64 %nbytes, i1 false)
  br label %dims_copy
dims_copy:
  %dcopyp = inttoptr i64 %dcopy to ptr
  %rbytes = shl i64 %rank, 3
  br i1 %scalar, label %publish, label %do_dims
do_dims:
  call void @llvm.memcpy.p0.p0.i64(ptr %dcopyp, ptr %dimsp, i64 %rbytes, i1 false)
  br label %publish
publish:
  %qp = inttoptr i64 %rec to ptr
  call void @put(ptr %qp, i64 0, i64 0)
  call void @put(ptr %qp, i64 {w["state"]}, i64 {native_slots.BUFFER_READY})
  call void @put(ptr %qp, i64 {w["device"]}, i64 %dev)
  call void @put(ptr %qp, i64 {w["memory"]}, i64 %memory)
  call void @put(ptr %qp, i64 {w["element_type"]}, i64 %type)
  call void @put(ptr %qp, i64 {w["data"]}, i64 %mem)
  call void @put(ptr %qp, i64 {w["shape_key"]}, i64 0)
  call void @put(ptr %qp, i64 {w["holds"]}, i64 0)
  call void @put(ptr %qp, i64 {w["owner"]}, i64 {native_slots.OWNER_NATIVE})
  call void @put(ptr %qp, i64 {w["descriptor"]}, i64 0)
  call void @put(ptr %qp, i64 {w["output"]}, i64 0)
  call void @put(ptr %qp, i64 {w["dims"]}, i64 %dcopy)
  call void @put(ptr %qp, i64 {w["rank"]}, i64 %rank)
  call void @put(ptr %qp, i64 {w["nbytes"]}, i64 %nbytes)
  call void @put(ptr %qp, i64 {w["external_refs"]}, i64 0)
  %tagp = getelementptr i64, ptr %qp, i64 {handles.TAG_WORD}
  store atomic i64 {handles.tag(runtime.BUFFER)}, ptr %tagp release, align 8
  call void @put(ptr %ap, i64 {o["buffer"]}, i64 %rec)
  call void @put(ptr %ap, i64 {o["done_with_host_buffer"]}, i64 {ready_event})
  call void @device_account(i64 %dev, i64 %nbytes, i64 1)
  ret i64 0
""")


def _allocator() -> Any:
  """The native range's allocator words (made once)."""
  table = handles.TABLE
  records = (table.native_end - table.native_start) // handles.RECORD_SIZE
  capacity = 1
  while capacity < records:
    capacity *= 2
  ring = handles.immortal((ctypes.c_int64 * capacity)())
  words = handles.immortal((ctypes.c_int64 * _ALLOCATOR_WORDS)())
  words[_NEXT] = table.native_start
  words[_END] = table.native_end
  words[_MASK] = capacity - 1
  words[_RING] = ctypes.addressof(ring)
  words[_QUARANTINE] = min(QUARANTINE, records // 2)
  return words, ring


def build(fallbacks: dict[str, int], required: dict[str, int],
          ready_event: int) -> dict[str, int]:
  """Compiles the native Execute and Buffer_Destroy (once per process) and
  installs the table's hooks; returns slot -> address. {} where the
  table has no native range."""
  table = handles.TABLE
  if not table.native_end or any(s not in fallbacks for s in SLOTS):
    return {}
  with _lock:
    if "slots" in _state:
      return dict(_state["slots"])
    words, ring = _allocator()
    allocator = ctypes.addressof(words)
    sizes = _element_sizes()
    size = {s: max(24, required.get(s, 0)) for s in SLOTS}
    text = "\n".join([
        _helpers_ir((table.region_start, table.region_end)),
        _owner_ir(allocator),
        _execute_ir(fallbacks[SLOTS[0]], size[SLOTS[0]], allocator,
                    ready_event),
        _destroy_ir(fallbacks[SLOTS[1]], size[SLOTS[1]], allocator),
        _reference_ir(SLOTS[2], fallbacks[SLOTS[2]], size[SLOTS[2]], 1),
        _reference_ir(SLOTS[3], fallbacks[SLOTS[3]], size[SLOTS[3]], -1),
        _host_buffer_ir(fallbacks[SLOTS[4]], size[SLOTS[4]], allocator,
                        ready_event, ctypes.addressof(sizes))])
    names = ["fast_" + s for s in SLOTS] + [
        "native_record_release", "native_buffer_retire",
        "native_buffer_claim", "native_account"]
    addresses = native.compile_ir(text, names)
    release = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)(
        addresses["native_record_release"])
    retire = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64)(
        addresses["native_buffer_retire"])
    claim = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(
        addresses["native_buffer_claim"])
    _state.update(words=words, ring=ring, release=release, retire=retire,
                  claim=claim, sizes=sizes,
                  slots={s: addresses["fast_" + s] for s in SLOTS})
    runtime.ACCOUNT[0] = ctypes.CFUNCTYPE(
        None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)(
            addresses["native_account"])
    table.adopter = _adopt
    table.releaser = lambda address: release(allocator, address)
    table.retirer = retire
    return dict(_state["slots"])


def native_buffer_count() -> int:
  """Live buffers that native code owns (for tests and leak checks)."""
  if "words" not in _state:
    return 0
  start = handles.TABLE.native_start
  used = (_state["words"][_NEXT] - start) // handles.RECORD_SIZE
  if used <= 0:
    return 0
  records = np.ctypeslib.as_array(
      (ctypes.c_int64 * (used * handles.RECORD_WORDS)).from_address(start)
  ).reshape(used, handles.RECORD_WORDS)
  return int(np.count_nonzero(
      (records[:, handles.TAG_WORD] == handles.tag(runtime.BUFFER)) &
      (records[:, _WORD["owner"]] == native_slots.OWNER_NATIVE)))


def enabled() -> bool:
  """Whether the native Execute is installed."""
  return "slots" in _state


# --------------------------------------------------------------------------
# Descriptors.


class Descriptor:
  """The words the native Execute reads for one loaded executable."""

  def __init__(self, plan: Any, device: runtime.Device,
               parameter_types, result_specs, donated: frozenset[int]):
    self.plan = plan
    self.client = device.client
    self.memory = device.default_memory
    self.specs = list(result_specs)
    self.param_keys = np.array(
        [native_slots.shape_key(t, s) for t, s in parameter_types] or [0],
        np.int64)
    info = []
    for t, shape in parameter_types:
      info += [int(t), len(shape), native_slots.shape_info(t, shape)[1]]
    self.param_info = np.array(info or [0], np.int64)
    outputs = []
    for spec, nbytes in zip(self.specs, plan.output_bytes):
      key, dims = native_slots.shape_info(spec.element_type, spec.shape)
      outputs += [key, int(nbytes), int(spec.element_type), dims,
                  len(spec.shape), spec.nbytes]
    self.outputs = np.array(outputs or [0], np.int64)
    self.donate = np.array(
        [NOT_DONATED if j not in donated else max(DONATED, k)
         for j, k in enumerate(plan.donate_to)] or [0], np.int64)
    self.words = np.zeros(DESCRIPTOR_WORDS, np.int64)
    self.words[NUM_PARAMS] = len(parameter_types)
    self.words[NUM_OUTPUTS] = len(self.specs)
    self.words[DEVICE_HANDLE] = device.handle
    self.words[MEMORY_HANDLE] = self.memory.handle
    self.words[PARAM_KEYS] = self.param_keys.ctypes.data
    self.words[OUTPUTS] = self.outputs.ctypes.data
    self.words[PLAN] = plan.address
    self.words[ENTRY] = plan.entry
    self.words[ALLOC] = _ALIGNED_ALLOC
    self.words[FREE] = _FREE
    self.words[DONATE] = self.donate.ctypes.data
    self.words[DONATES] = 1 if donated else 0
    self.words[PARAM_INFO] = self.param_info.ctypes.data
    self.address = int(self.words.ctypes.data)

  def arm(self, armed: bool) -> None:
    self.words[ARMED] = 1 if armed else 0

  def forget_plan(self) -> None:
    """Drops the plan (its executable is gone); native buffers made by it
    still name this descriptor, for their adoption."""
    self.arm(False)
    self.plan = None


def descriptor_for(loaded: Any) -> Optional[Descriptor]:
  """A descriptor for LoadedExecutable `loaded`, or None where its
  executions need Python (see the module docstring)."""
  if not enabled():
    return None
  executable = loaded.executable
  if (len(loaded.devices) != 1 or loaded.assignment is None or
      executable.num_replicas != 1 or executable.num_partitions != 1):
    return None
  token = abi_types.BufferType.TOKEN
  if any(t == token for t, _ in executable.parameter_types) or any(
      spec.element_type == token for spec in executable.result_specs):
    return None  # Tokens have no buffer in the plan; Python passes them.
  donated = frozenset(executable.donatable)
  plan = executable.compiled.native_plan(donated)
  if (plan is None or plan.num_params != len(executable.parameter_types) or
      len(plan.output_bytes) != len(executable.result_specs)):
    return None
  device = loaded.devices[0]
  if not device.handle or not device.default_memory.handle:
    return None
  descriptor = Descriptor(plan, device, executable.parameter_types,
                          executable.result_specs, donated)
  with _lock:
    _DESCRIPTORS[descriptor.address] = descriptor
  weakref.finalize(loaded, descriptor.forget_plan)
  return descriptor


# --------------------------------------------------------------------------
# Adoption.


def _adopt(address: int) -> Optional[tuple[str, Any]]:
  """The Python Buffer for native record `address`, which becomes
  Python-owned; None if it is not a live native buffer. Called by the
  handle table under its lock."""
  record = (ctypes.c_int64 * handles.RECORD_WORDS).from_address(address)
  w = _WORD
  if (record[handles.TAG_WORD] != handles.tag(runtime.BUFFER) or
      record[w["owner"]] != native_slots.OWNER_NATIVE):
    return None
  made_by = record[w["descriptor"]]
  if made_by:
    descriptor = _DESCRIPTORS.get(made_by)
    if descriptor is None:
      return None
    client, memory = descriptor.client, descriptor.memory
    spec = descriptor.specs[record[w["output"]]]
  else:  # Made by the native transfer: its record has the rest.
    memory = handles.TABLE.get_unlocked(record[w["memory"]], runtime.MEMORY)
    if memory is None:
      return None
    client = memory.device.client
    rank = record[w["rank"]]
    dims = tuple((ctypes.c_int64 * max(1, rank)).from_address(
        record[w["dims"]])[:rank])
    spec = runtime.BufferSpec(abi_types.BufferType(record[w["element_type"]]),
                              dims)
  external_refs = _state["claim"](address)  # Python's from here on.
  if external_refs < 0:
    return None
  if not made_by:
    # Python's buffers share one dims array per shape; the record's own
    # copy goes.
    own_dims = record[w["dims"]]
    record[w["shape_key"]], record[w["dims"]] = native_slots.shape_info(
        spec.element_type, spec.shape)
    _LIBC.free(own_dims)
  data = record[w["data"]]
  array = (_owned_array(data, spec) if data else
           np.empty(0, spec.dtype))
  # Native code counted its bytes in the device's statistics (until its
  # memory moved to a result).
  buffer = runtime.Buffer.ready_of(client, memory, spec, array, counted=True)
  buffer.adopt_native(spec.nbytes if data else 0, external_refs)
  buffer.handle = address
  if record[w["state"]] != native_slots.BUFFER_READY:
    # Donated to a native execution (its memory may live on as a result).
    buffer.handle = 0
    buffer.delete()
    buffer.handle = address
  return runtime.BUFFER, buffer


def _owned_array(data: int, spec: runtime.BufferSpec) -> np.ndarray:
  """An array of `spec` over malloc'd `data`, freed with the last view."""
  raw = (ctypes.c_char * max(1, spec.nbytes)).from_address(data)
  weakref.finalize(raw, _LIBC.free, data)
  flat = np.frombuffer(raw, np.uint8, count=spec.nbytes)
  return flat.view(spec.dtype).reshape(spec.shape)
