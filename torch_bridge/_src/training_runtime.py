"""A lean autograd runtime for plain training graphs.

AOTAutograd returns, for a training graph, a callable that runs its
compiled forward inside an autograd.Function and, on the first backward,
compiles and runs the backward. Its runtime wrappers handle every case
AOTAutograd supports: inputs mutated in place (batch norm's running
statistics), outputs that alias inputs or each other, tensor subclasses,
functionalized RNG, effect tokens, duplicated inputs, symbolic sizes saved
for the backward, autocast. For a small model those wrappers cost more per
step than our compiled programs: 50-60 us of Python per training step on
the bench's MLP, a sixth of its eager step.

Most graphs need none of that. `LeanTraining` runs AOTAutograd's callable
until the backward has been compiled (AOTAutograd compiles it during the
first backward pass); then it checks the graph's metadata (AOTAutograd's
ViewAndMutationMeta, read as the forward was compiled) and the first
call's arguments and, where the graph is *plain*, runs the later calls'
two compiled graphs through one autograd.Function of its own:

  forward:  outputs = fw(args); the first `num_outputs` are the user's,
            the rest are saved for the backward;
  backward: grads = bw(saved + tangents), one per input.

Plain means: every input and output a dense tensor of a plain type, no
input mutated, no output aliasing an input or another output, nothing
saved but tensors, no RNG state, effect tokens or subclass metadata,
every user output differentiable with a dense traced tangent, the
forward's inputs exactly the callable's arguments, no autocast at compile
time and no compiled autograd. Anything else keeps AOTAutograd's runtime,
as does a graph whose backward never runs.

Tangents are made dense before the backward, as AOTAutograd makes them
match their traced (dense) layout: the backward graph may view them.
Double backward raises, as AOTAutograd's runtime does.

Where the forward and the backward are each one compiled cluster (the
common case: no eager node), the function calls the two clusters
directly (DirectPlan), and an activation saved for the backward that only
the backward program reads stays the forward program's buffer, a raw
PJRT handle (runtime.Kept), instead of a tensor made, saved, unpacked
and looked up again (BERT's forward keeps 39 of its saved values so).
The kept buffers go when the backward has run (unless the graph is
retained) or with the graph.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import torch
from torch.autograd.function import once_differentiable

from torch_bridge._src import helpers
from torch_bridge._src import runtime


class Captured:
  """What AOTAutograd's compilers were given for one graph: the compiled
  forward and backward (boxed: called with one list) and the forward's
  metadata, with the graphs' input and output counts."""

  def __init__(self):
    self.forward: Optional[Callable] = None
    self.backward: Optional[Callable] = None
    # Each compiled graph as a backend.DirectCall where it is one flat
    # compiled cluster (None otherwise).
    self.forward_direct: Any = None
    self.backward_direct: Any = None
    self.metadata: Any = None
    self.forward_inputs = -1
    self.forward_outputs = -1
    self.backward_inputs = -1
    self.backward_outputs = -1
    self.autocast = False
    # Called (no arguments) once the backward is compiled.
    self.on_backward: Optional[Callable[[], None]] = None

  def saw_forward(self, gm: torch.fx.GraphModule, compiled: Callable,
                  direct: Any = None) -> None:
    self.forward = compiled
    self.forward_direct = direct
    self.forward_inputs, self.forward_outputs = _arity(gm)
    self.autocast = torch._C._is_any_autocast_enabled()  # pylint: disable=protected-access
    try:
      from torch._guards import TracingContext  # pylint: disable=g-import-not-at-top
      context = TracingContext.try_get()
      self.metadata = getattr(context, "fw_metadata", None)
    except Exception:  # pylint: disable=broad-except
      self.metadata = None  # Another torch: AOTAutograd's runtime stays.

  def saw_backward(self, gm: torch.fx.GraphModule, compiled: Callable,
                   direct: Any = None) -> None:
    self.backward = compiled
    self.backward_direct = direct
    self.backward_inputs, self.backward_outputs = _arity(gm)
    if self.on_backward is not None:
      self.on_backward()


def _arity(gm: torch.fx.GraphModule) -> tuple[int, int]:
  inputs, outputs = 0, -1
  for node in gm.graph.nodes:
    if node.op == "placeholder":
      inputs += 1
    elif node.op == "output":
      result = node.args[0]
      outputs = len(result) if isinstance(result, (tuple, list)) else -1
  return inputs, outputs


def _plain_meta(meta) -> bool:
  """Whether entries of a subclass metadata list all describe plain
  tensors (or are absent)."""
  if not meta:
    return True
  from torch._functorch._aot_autograd import schemas  # pylint: disable=g-import-not-at-top
  creation = getattr(schemas, "SubclassCreationMeta", None)
  return creation is None or not any(isinstance(m, creation) for m in meta)


_PLAIN_TENSOR_TYPES = (torch.Tensor, torch.nn.Parameter)


def why_not_plain_args(args: Sequence[Any]) -> Optional[str]:
  """None when a graph's arguments (Dynamo's guards keep every later
  call's of the same types, shapes and requires_grad) suit the lean
  runtime; otherwise why not."""
  if not all(type(x) in _PLAIN_TENSOR_TYPES for x in args):
    return "an input is not a plain tensor"
  if len({id(x) for x in args}) != len(args):
    return "an input is passed twice"
  return None


def why_not_plain(captured: Captured, num_args: int) -> Optional[str]:
  """None when the captured graph, called with `num_args` arguments that
  suit it (why_not_plain_args), can run on the lean runtime; otherwise the
  first reason it cannot."""
  meta = captured.metadata
  if captured.forward is None or captured.backward is None:
    return "no compiled backward"
  if meta is None:
    return "no forward metadata"
  try:
    from torch._functorch._aot_autograd import schemas  # pylint: disable=g-import-not-at-top
    not_mutated = schemas.MutationType.NOT_MUTATED
    non_alias = schemas.OutputType.non_alias
  except (ImportError, AttributeError):
    return "unknown AOTAutograd metadata"
  if captured.autocast:
    return "autocast was enabled"
  if _compiled_autograd_enabled():
    return "compiled autograd is enabled"
  n = num_args
  if captured.forward_inputs != n:
    return "the forward takes other inputs than the graph"
  if any(i.mutation_type != not_mutated for i in meta.input_info):
    return "an input is mutated"
  num_outputs = len(meta.output_info)
  for o in meta.output_info:
    if (o.output_type != non_alias or not o.requires_grad or
        not issubclass(o.raw_type, torch.Tensor) or
        o.base_idx is not None):
      return "an output aliases, needs no gradient, or is not a tensor"
  if (meta.num_intermediate_bases or meta.tokens or
      getattr(meta, "num_backward_tokens", 0) or
      getattr(meta, "num_graphsafe_rng_states", 0) or
      getattr(meta, "is_rng_op_functionalized", False) or
      getattr(meta, "indices_of_inputs_that_requires_grad_with_mutations_in_bw",
              None)):
    return "intermediate bases, tokens or RNG state"
  for count in ("num_symints_saved_for_bw", "num_opaque_objects_saved_for_bw",
                "num_tensors_saved_with_no_vc_check"):
    if getattr(meta, count, None):
      return f"{count} is {getattr(meta, count)}"
  if not all(_plain_meta(getattr(meta, m, None)) for m in (
      "subclass_inp_meta", "subclass_fw_graph_out_meta",
      "subclass_tangent_meta")):
    return "tensor subclasses"
  if not _dense_tangents(getattr(meta, "subclass_tangent_meta", None),
                         num_outputs):
    return "a tangent is expected in a layout other than dense"
  saved = captured.forward_outputs - num_outputs
  if (captured.forward_outputs < num_outputs or
      captured.backward_inputs != saved + num_outputs or
      captured.backward_outputs != n):
    return "the graphs' inputs and outputs do not line up"
  return None


def _dense_tangents(metas, count: int) -> bool:
  """Whether AOTAutograd expects `count` tangents, each a plain tensor in
  the dense row-major layout (so that `.contiguous()` is its coercion)."""
  if metas is None or len(metas) != count:
    return False
  from torch._functorch._aot_autograd import schemas  # pylint: disable=g-import-not-at-top
  for m in metas:
    if type(m) is not schemas.PlainTensorMeta or m.memory_format is None:
      return False
    layout = m.memory_format
    if layout.memory_format is not None:
      if layout.memory_format != torch.contiguous_format:
        return False
      continue
    if layout.size is None or layout.stride is None:
      return False
    if tuple(layout.stride) != helpers.contiguous_strides(layout.size):
      return False
  return True


def _compiled_autograd_enabled() -> bool:
  try:
    from torch._dynamo import compiled_autograd  # pylint: disable=g-import-not-at-top
    return bool(getattr(compiled_autograd, "compiled_autograd_enabled", False)
                or getattr(compiled_autograd, "in_compiled_autograd_region",
                           False))
  except ImportError:
    return False


def _once_differentiable(backward: Callable) -> Callable:
  """torch's once_differentiable, without its no_grad context where grad
  mode is already off (every backward but a create_graph one): that
  context costs about as much as the rest of the function's glue."""
  checked = once_differentiable(backward)
  is_grad_enabled = torch.is_grad_enabled

  def wrapper(ctx, *grads):
    if is_grad_enabled():
      return checked(ctx, *grads)
    return backward(ctx, *grads)

  return wrapper


def _lean_function(fw: Callable, bw: Callable, num_outputs: int) -> type:
  class LeanCompiledFunction(torch.autograd.Function):
    """One plain training graph: its compiled forward and backward."""

    @staticmethod
    def forward(ctx, *args):  # pylint: disable=arguments-differ
      outs = fw(list(args))
      ctx.save_for_backward(*outs[num_outputs:])
      return tuple(outs[:num_outputs])

    @staticmethod
    @_once_differentiable
    def backward(ctx, *grads):  # pylint: disable=arguments-differ
      args = list(ctx.saved_tensors)
      args.extend(g.contiguous() for g in grads)
      return tuple(bw(args))

  return LeanCompiledFunction


class DirectPlan:
  """How the lean runtime calls a graph pair whose forward and backward
  are each one flat compiled cluster (backend.DirectCall): the clusters
  directly, and each saved activation that only the backward program
  reads kept as the forward program's raw buffer (runtime.Kept) rather
  than made a tensor and found again.

  Attributes:
    fw, bw: the DirectCalls.
    num_outputs: the user's outputs among the forward's (the rest are
      saved for the backward).
    keep: per forward-cluster result, whether it is kept raw; None where
      none is.
    layout: per saved value, (True, i): the i-th kept value, or
      (False, i): the i-th tensor saved with save_for_backward.
    kept_results: the forward-cluster result index of each kept value.
  """

  def __init__(self, fw: Any, bw: Any, num_outputs: int):
    self.fw, self.bw = fw, bw
    self.num_outputs = num_outputs
    fw_program, bw_program = fw.program, bw.program
    raw_ok = (fw_program.zero_copy and bw_program.zero_copy and
              fw_program.client is bw_program.client)
    out_keys = fw_program.output_keys
    keep = [False] * len(out_keys)
    self.layout: list[tuple[bool, int]] = []
    self.kept_results: list[int] = []
    passed_through = {k for kind, k in bw.out_spec if kind == bw.IN}
    tensors = 0
    for s, spec in enumerate(fw.out_spec[num_outputs:]):
      kind, k = spec
      raw = (raw_ok and kind == fw.OUT and fw.out_spec.count(spec) == 1 and
             bw.in_index.count(s) == 1 and s not in passed_through and
             out_keys[k] is bw_program.input_key(bw.in_index.index(s)))
      if raw:
        keep[k] = True
        self.layout.append((True, len(self.kept_results)))
        self.kept_results.append(k)
      else:
        self.layout.append((False, tensors))
        tensors += 1
    self.keep = keep if self.kept_results else None


def direct_plan(captured: Captured, num_outputs: int
                ) -> Optional[DirectPlan]:
  """The DirectPlan of a plain graph pair, or None where either graph is
  more than one flat compiled cluster."""
  fw, bw = captured.forward_direct, captured.backward_direct
  if fw is None or bw is None:
    return None
  if (len(fw.out_spec) != captured.forward_outputs or
      len(bw.out_spec) != captured.backward_outputs):
    return None
  return DirectPlan(fw, bw, num_outputs)


def _no_materialize(args: list[Any]) -> list[Any]:
  return args


def _direct_function(plan: DirectPlan) -> type:
  fw, bw = plan.fw, plan.bw
  fw_cluster, bw_cluster = fw.cluster, bw.cluster
  fw_in, bw_in = fw.in_index, bw.in_index
  fw_program = fw.program
  n = plan.num_outputs
  keep, layout, kept_results = plan.keep, plan.layout, plan.kept_results
  keep_graph = torch._C._autograd._get_current_graph_task_keep_graph  # pylint: disable=protected-access
  saved_tensors_hooks = torch._C._autograd._top_saved_tensors_default_hooks  # pylint: disable=protected-access

  class LeanDirectFunction(torch.autograd.Function):
    """One plain training graph whose forward and backward are each one
    compiled cluster, called directly (DirectPlan)."""

    @staticmethod
    def forward(ctx, *args):  # pylint: disable=arguments-differ
      # Pack hooks (offloading, compression) see every saved value, as on
      # AOTAutograd's runtime: under them nothing is kept raw.
      hooked = saved_tensors_hooks(False) is not None
      outs = fw.pick(args, fw_cluster.call_raw(
          [args[i] for i in fw_in], None if hooked else keep,
          _no_materialize))
      if hooked:
        ctx.save_for_backward(*outs[n:])
        ctx.kept = None
      else:
        saved = []
        kept = []
        for value, (raw, _) in zip(outs[n:], layout):
          (kept if raw else saved).append(value)
        ctx.save_for_backward(*saved)
        ctx.kept = (runtime.Kept(fw_program, kept_results, kept) if kept
                    else None)
      ctx.all_saved = hooked
      return tuple(outs[:n])

    @staticmethod
    @_once_differentiable
    def backward(ctx, *grads):  # pylint: disable=arguments-differ
      kept = ctx.kept
      if kept is not None and kept.released:
        raise RuntimeError(
            "Trying to backward through the graph a second time (or "
            "directly access saved tensors after they have already been "
            "freed). Saved intermediate values of the graph are freed when "
            "you call .backward() or autograd.grad(). Specify "
            "retain_graph=True if you need to backward through the graph "
            "a second time or if you need to access saved tensors after "
            "calling backward.")
      tensors = ctx.saved_tensors
      if ctx.all_saved:
        args = list(tensors)
      else:
        values = kept.values() if kept is not None else ()
        args = [values[i] if raw else tensors[i] for raw, i in layout]
      args.extend(g.contiguous() for g in grads)

      def materialize(xs):
        if kept is None:
          return xs
        before = list(values)
        made = {b: t for b, t in zip(before, kept.tensors())
                if type(b) is int}  # pylint: disable=unidiomatic-typecheck
        return [made[x] if type(x) is int else x for x in xs]  # pylint: disable=unidiomatic-typecheck

      results = bw_cluster.call_raw([args[i] for i in bw_in], None,
                                    materialize)
      if kept is not None and not keep_graph():
        kept.release()
      return tuple(bw.pick(args, results))

  return LeanDirectFunction


class LeanTraining:
  """The callable handed to Dynamo for a training graph: AOTAutograd's
  `compiled` until the backward is compiled, then the lean runtime where
  the graph is plain (see the module's doc). `reason` says why not (None:
  lean, or not decided yet)."""

  def __init__(self, compiled: Callable, captured: Captured,
               enabled: bool = True):
    self._compiled = compiled
    self._captured = captured
    self._apply: Optional[Callable] = None
    self._result_type: Optional[type] = None
    self._num_args = -1
    self._args_reason: Optional[str] = None
    self.decided = not enabled
    self.reason: Optional[str] = None if enabled else "disabled"
    # The DirectPlan the lean runtime calls the clusters by, if any.
    self.direct: Optional[DirectPlan] = None
    if enabled:
      captured.on_backward = self._settle

  @property
  def lean(self) -> bool:
    return self._apply is not None

  def __call__(self, *args):
    apply = self._apply
    if apply is not None:
      return self._result_type(apply(*args))
    if self._result_type is None and not self.decided:
      # The first call: Dynamo's guards keep the later ones like it.
      self._num_args = len(args)
      self._args_reason = why_not_plain_args(args)
      result = self._compiled(*args)
      self._result_type = type(result)
      return result
    return self._compiled(*args)

  def _settle(self) -> None:
    """Decides, as the backward is compiled (during the first backward
    pass), for the calls that follow."""
    if self.decided:
      return
    self.decided = True
    captured = self._captured
    try:
      self.reason = self._args_reason or why_not_plain(captured,
                                                       self._num_args)
    except Exception as e:  # pylint: disable=broad-except
      # Metadata of another shape (another torch): AOTAutograd's runtime
      # stays, and the backward being compiled goes on.
      self.reason = f"unreadable AOTAutograd metadata ({e!r})"
    if self.reason is None and self._result_type not in (list, tuple):
      self.reason = "the graph's result is not a list"
    if self.reason is None:
      num_outputs = len(captured.metadata.output_info)
      plan = direct_plan(captured, num_outputs)
      self.direct = plan
      if plan is not None:
        self._apply = _direct_function(plan).apply
      else:
        self._apply = _lean_function(captured.forward, captured.backward,
                                     num_outputs).apply
