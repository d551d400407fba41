"""The torch.compile backend: AOTAutograd graphs -> clusters -> PJRT.

    model = torch.compile(model, backend="openxla_stablehlo",
                          options={"min_cluster_size": 4})

Dynamo captures a graph; AOTAutograd turns it into functional ATen graphs
(forward and backward for training, one graph under no_grad), with torch's
core ATen decompositions. Each graph is partitioned with torch.fx's
`CapabilityBasedPartitioner` driven by the lowering table; clusters with at
least `min_cluster_size` compute nodes become one StableHLO program each,
compiled through PJRT; everything else runs eagerly as ATen calls.

Backward graphs return None for inputs that need no gradient, and training
batch norm returns its new running statistics as extra outputs; both stay
in the outer (eager) graph, so clusters only ever see tensors.

Whatever cannot be compiled (no lowering, an unsupported dtype, a dynamic
shape, a plugin compile or run failure) runs eagerly, with one warning per
reason, unless `require_full_compilation` (option, or the flag
--torch_bridge_require_full_compilation in $OPENXLA_FLAGS) makes it an
error.
"""

from __future__ import annotations

import dataclasses
import operator
import time
import warnings
from typing import Any, Callable, Optional, Sequence

import torch
import torch.fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner

import support
from torch_bridge._src import lowering
from torch_bridge._src import ops_nn
from torch_bridge._src import registry
from torch_bridge._src import runtime
from torch_bridge._src import training_runtime
from torch_bridge._src import capability as op_support

BACKEND_NAME = "openxla_stablehlo"

REQUIRE_FULL_COMPILATION = support.flags.define_bool(
    "torch_bridge_require_full_compilation", False,
    "Make every eager fallback of the torch bridge an error.")


class FallbackWarning(UserWarning):
  """Part of a model runs eagerly instead of through PJRT."""


_PARTITIONERS = ("min_cut", "default")


def default_threads() -> int:
  """The plugin's threads per execution when the options name none: as
  many as torch's intra-op threads (torch.get_num_threads(), at compile
  time), so that a program and torch's eager ops between programs use
  the same cores, and no more of them."""
  return max(1, torch.get_num_threads())


@dataclasses.dataclass(frozen=True)
class Options:
  plugin: str = runtime.DEFAULT_PLUGIN
  min_cluster_size: int = 4
  require_full_compilation: bool = False
  # Op names ("aten.mul.Tensor") that always run eagerly.
  eager_ops: frozenset[str] = frozenset()
  # Apply torch's core ATen decompositions in AOTAutograd.
  decompose: bool = True
  # How AOTAutograd splits a training graph into forward and backward:
  # "min_cut" (torch's min_cut_rematerialization_partition, as inductor)
  # saves fewer activations and recomputes cheap elementwise ops in the
  # backward, where they fuse into the backward's clusters; "default"
  # saves every intermediate the backward reads.
  partitioner: str = "min_cut"
  # Threads one execution of a compiled cluster splits its kernels across
  # (the plugin's intra_op_parallelism_threads create option): None picks
  # for torch (see `threads`), 0 leaves the plugin's default (ours: one per
  # core), n uses n.
  intra_op_parallelism_threads: int | None = None
  # Run plain training graphs (no input mutation, no aliasing outputs, ...)
  # through the bridge's own autograd.Function rather than AOTAutograd's
  # general runtime wrappers, which cost more per step than a small
  # model's programs (see training_runtime).
  lean_runtime: bool = True

  @classmethod
  def make(cls, options: dict[str, Any] | None) -> "Options":
    options = dict(options or {})
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(options) - known)
    if unknown:
      raise support.InvalidArgumentError(
          f"unknown {BACKEND_NAME} option(s) {unknown}; known: "
          f"{sorted(known)}")
    if "eager_ops" in options:
      options["eager_ops"] = frozenset(options["eager_ops"])
    result = cls(**options)
    if result.partitioner not in _PARTITIONERS:
      raise support.InvalidArgumentError(
          f"partitioner must be one of {sorted(_PARTITIONERS)}, got "
          f"{result.partitioner!r}")
    if result.min_cluster_size < 1:
      raise support.InvalidArgumentError(
          f"min_cluster_size must be >= 1, got {result.min_cluster_size}")
    threads = result.intra_op_parallelism_threads
    if threads is not None and (isinstance(threads, bool) or
                                not isinstance(threads, int) or threads < 0):
      raise support.InvalidArgumentError(
          f"intra_op_parallelism_threads must be None or an int >= 0, got "
          f"{threads!r}")
    return result

  @property
  def threads(self) -> int:
    """The thread count the plugin's client is created with (0: the
    plugin's default)."""
    if self.intra_op_parallelism_threads is not None:
      return self.intra_op_parallelism_threads
    return default_threads()

  @property
  def strict(self) -> bool:
    return self.require_full_compilation or REQUIRE_FULL_COMPILATION.value


@dataclasses.dataclass
class ClusterInfo:
  name: str
  num_nodes: int
  num_compute: int
  ops: dict[str, int]
  compiled: bool = False
  compile_seconds: float = 0.0
  cache_hit: bool = False
  program: str = ""
  fallback_reason: str = ""


@dataclasses.dataclass
class EagerNode:
  name: str
  op: str
  reason: str


@dataclasses.dataclass
class GraphReport:
  kind: str  # "forward", "backward" or "inference"
  num_nodes: int
  clusters: list[ClusterInfo] = dataclasses.field(default_factory=list)
  eager: list[EagerNode] = dataclasses.field(default_factory=list)
  picture: str = ""
  seconds: float = 0.0


_warned: set[str] = set()


def _fallback(options: Options, message: str) -> None:
  if options.strict:
    raise support.UnimplementedError(
        f"{BACKEND_NAME}: {message} (require_full_compilation is set)")
  if message not in _warned:
    _warned.add(message)
    warnings.warn(f"{BACKEND_NAME}: {message}; running it eagerly",
                  FallbackWarning, stacklevel=3)


class CompiledCluster(torch.nn.Module):
  """One cluster: a PJRT executable, with its eager graph kept for a
  fallback if running the executable fails."""

  def __init__(self, info: ClusterInfo, program: runtime.Program, structure,
               eager: torch.fx.GraphModule, options: Options):
    super().__init__()
    self.info = info
    self._program = program
    self._structure = structure
    # A graph output that is the program's results in order (the common
    # case: a tuple of the cluster's values) needs no rebuilding.
    self._flat = (isinstance(structure, (tuple, list)) and
                  list(structure) == list(range(len(structure))))
    self._flat_type = type(structure)
    self.eager = eager
    self._options = options
    self._failed = False

  def __call__(self, *args):
    # Called only by the partitioned graph: no hooks to run.
    return self.forward(*args)

  def forward(self, *args):
    if not self._failed:
      try:
        if self._flat:
          outputs = self._program(args)
          return outputs if self._flat_type is list else tuple(outputs)
        return runtime.rebuild(self._structure, self._program(args))
      except support.XlaError as e:
        self._fail(e)
    return self.eager(*args)

  def _fail(self, error: support.XlaError) -> None:
    self._failed = True
    self.info.fallback_reason = f"execution failed: {error}"
    _fallback(self._options, f"cluster {self.info.name} failed to run "
              f"({error})")

  @property
  def program(self) -> runtime.Program:
    return self._program

  @property
  def flat(self) -> bool:
    """Whether the cluster's result is its program's results in order."""
    return self._flat

  def call_raw(self, args: list[Any], keep: Sequence[bool] | None,
               materialize: Callable[[list[Any]], list[Any]]) -> list[Any]:
    """The flat cluster's results for `args` through Program.call_raw
    (raw buffer handles among `args`, results `keep` marks left raw);
    after a failure, `materialize(args)` gives tensors for the eager
    graph, whose results are all tensors."""
    if not self._failed:
      try:
        return self._program.call_raw(args, keep)
      except support.XlaError as e:
        self._fail(e)
    return list(self.eager(*materialize(args)))


class DirectCall:
  """A partitioned graph that is one flat compiled cluster between the
  graph's inputs and outputs, for a caller that calls the cluster itself
  (the lean training runtime: no graph module or module call per step,
  and values kept as raw buffers between its two programs).

  Attributes:
    cluster: the CompiledCluster.
    in_index: the graph input each cluster argument is.
    out_spec: per graph output, (OUT, k): the cluster's k-th result,
      (IN, j): graph input j, or (NONE, 0): None.
  """

  OUT, IN, NONE = 0, 1, 2

  def __init__(self, cluster: CompiledCluster, in_index: list[int],
               out_spec: list[tuple[int, int]]):
    self.cluster = cluster
    self.in_index = in_index
    self.out_spec = out_spec

  @property
  def program(self) -> runtime.Program:
    return self.cluster.program

  def pick(self, args: Sequence[Any], results: Sequence[Any]) -> list[Any]:
    """The graph's outputs from its inputs `args` and the cluster's
    `results`."""
    return [results[k] if kind == self.OUT else args[k] if kind == self.IN
            else None for kind, k in self.out_spec]


def direct_call(fused: torch.fx.GraphModule) -> Optional[DirectCall]:
  """`fused` as a DirectCall, or None where it is anything more than one
  flat compiled cluster (eager nodes, several clusters, a failed
  compile, a nested result)."""
  inputs: dict[torch.fx.Node, int] = {}
  items: dict[torch.fx.Node, int] = {}
  call = output = None
  for node in fused.graph.nodes:
    if node.op == "placeholder":
      inputs[node] = len(inputs)
    elif node.op == "call_module" and call is None:
      call = node
      cluster = getattr(fused, str(node.target), None)
      if (not isinstance(cluster, CompiledCluster) or not cluster.flat or
          node.kwargs or not all(a in inputs for a in node.args)):
        return None
    elif (node.op == "call_function" and node.target is operator.getitem
          and call is not None and node.args[0] is call and
          isinstance(node.args[1], int) and not node.kwargs):
      items[node] = node.args[1]
    elif node.op == "output" and output is None:
      output = node
    else:
      return None
  if call is None or output is None:
    return None
  result = output.args[0]
  if not isinstance(result, (tuple, list)):
    return None
  spec = []
  for value in result:
    if value is None:
      spec.append((DirectCall.NONE, 0))
    elif value in items:
      spec.append((DirectCall.OUT, items[value]))
    elif value in inputs:
      spec.append((DirectCall.IN, inputs[value]))
    else:
      return None
  return DirectCall(getattr(fused, str(call.target)),
                    [inputs[a] for a in call.args], spec)


def _op_counts(gm: torch.fx.GraphModule) -> dict[str, int]:
  counts: dict[str, int] = {}
  for node in gm.graph.nodes:
    if node.op == "call_function" and op_support.op_name(node) != "getitem":
      name = op_support.op_name(node)
      counts[name] = counts.get(name, 0) + 1
  return counts


def partition(gm: torch.fx.GraphModule, options: Options, kind: str
              ) -> tuple[torch.fx.GraphModule, GraphReport]:
  """Fuses the supported clusters of `gm` into `fused_N` submodules and
  compiles each; returns the rewritten module and its report."""
  start = time.perf_counter()
  report = GraphReport(kind, sum(1 for n in gm.graph.nodes
                                 if n.op == "call_function"))
  table = op_support.TableSupport(options.eager_ops)
  partitioner = CapabilityBasedPartitioner(
      gm, table, allows_single_node_partition=True,
      non_compute_ops=list(op_support.NON_COMPUTE_OPS))
  proposed = partitioner.propose_partitions()
  small: dict[torch.fx.Node, str] = {}
  keep = []
  for p in proposed:
    compute = sum(1 for n in p.nodes if op_support.is_compute(n))
    if compute >= options.min_cluster_size:
      keep.append(p)
    else:
      for n in p.nodes:
        small[n] = (f"in a cluster of {compute} compute node(s), below "
                    f"min_cluster_size={options.min_cluster_size}")
  reasons = dict(table.reasons)
  reasons.update(small)
  # Reasons are keyed by the original nodes; names survive the fusion.
  by_name = {n.name: (op_support.op_name(n), r) for n, r in reasons.items()}
  fused = partitioner.fuse_partitions(keep) if keep else gm

  for node in list(fused.graph.nodes):
    if node.op != "call_module" or not str(node.target).startswith("fused_"):
      continue
    sub = getattr(fused, node.target)
    counts = _op_counts(sub)
    info = ClusterInfo(
        node.target, sum(counts.values()),
        sum(1 for n in sub.graph.nodes if op_support.is_compute(n)), counts)
    report.clusters.append(info)
    try:
      text, _, structure = lowering.lower_graph(sub, name=node.target)
      info.program = text
      arg_types, result_types = lowering.signature(sub)
      threads = options.threads
      exe, seconds, hit = runtime.compile_program(text, options.plugin,
                                                  threads)
      program = runtime.Program(exe, runtime.client(options.plugin, threads),
                                arg_types, result_types)
    except Exception as e:  # pylint: disable=broad-except
      # Whatever goes wrong (a lowering the table lacks, a plugin that
      # rejects the program, or a bug of ours) costs speed, not the model.
      info.fallback_reason = (str(e) if isinstance(e, support.XlaError)
                              else f"{type(e).__name__}: {e}")
      what = ("lowering" if isinstance(e, registry.LoweringError)
              else "compilation")
      _fallback(options, f"{what} of {kind} cluster {node.target} failed: "
                f"{info.fallback_reason}")
      continue
    info.compiled, info.compile_seconds, info.cache_hit = True, seconds, hit
    setattr(fused, node.target,
            CompiledCluster(info, program, structure, sub, options))

  for node in fused.graph.nodes:
    if node.op == "call_function" and op_support.op_name(node) != "getitem":
      op, reason = by_name.get(node.name, (op_support.op_name(node),
                                           "not clustered"))
      report.eager.append(EagerNode(node.name, op, reason))
  by_design = set(op_support.EAGER_BY_DESIGN.values())
  unsupported = sorted({f"{e.op} ({e.reason})" for e in report.eager
                        if "min_cluster_size" not in e.reason and
                        e.reason not in by_design})
  if unsupported:
    _fallback(options, f"{kind} graph: unsupported: " +
              "; ".join(unsupported))
  report.picture = picture(fused)
  report.seconds = time.perf_counter() - start
  fused.recompile()
  return fused, report


def picture(gm: torch.fx.GraphModule) -> str:
  """A text picture of a partitioned graph: one line per node, clusters as
  boxes, with the values each node reads."""
  lines = []
  for node in gm.graph.nodes:
    reads = ", ".join(a.name for a in node.all_input_nodes)
    if node.op == "placeholder":
      lines.append(f"  (in)  {node.name}")
    elif node.op == "output":
      lines.append(f"  (out) <- {reads}")
    elif node.op == "call_module":
      sub = getattr(gm, node.target)
      if isinstance(sub, CompiledCluster):
        info = sub.info
        ops_text = ", ".join(f"{op.split('.')[1]}x{n}" if n > 1 else
                             op.split(".")[1]
                             for op, n in sorted(info.ops.items()))
        state = "PJRT" if not info.fallback_reason else "EAGER (failed)"
        lines.append(f"  [{info.name}: {state}, {info.num_nodes} ops] "
                     f"{{{ops_text}}} <- {reads}")
      else:
        lines.append(f"  [{node.target}: EAGER (not compiled)] <- {reads}")
    elif op_support.op_name(node) == "getitem":
      continue
    else:
      lines.append(f"  eager {op_support.op_name(node)} {node.name} "
                   f"<- {reads}")
  return "\n".join(lines)


def _generated_forward(gm: torch.fx.GraphModule) -> Callable:
  """`gm`'s generated forward. A lazy GraphModule's `forward` generates the
  code on the first call and then calls the module again, through
  nn.Module.__call__, on every call: the code is generated here instead."""
  real_recompile = getattr(gm, "real_recompile", None)
  if callable(real_recompile):
    real_recompile()
  return gm.forward


class Backend:
  """A torch.compile backend instance; keeps the reports of what it
  compiled (for `explain` and the benchmark)."""

  def __init__(self, options: Options | dict[str, Any] | None = None):
    self.options = (options if isinstance(options, Options)
                    else Options.make(options))
    self.reports: list[GraphReport] = []
    # The callables of the training graphs compiled (whether each runs on
    # the lean runtime, and why not).
    self.training: list[training_runtime.LeanTraining] = []

  def _compiler(self, kind: str,
                captured: training_runtime.Captured | None = None
                ) -> Callable:
    def compile_graph(gm: torch.fx.GraphModule, example_inputs):
      from functorch.compile import make_boxed_func  # pylint: disable=g-import-not-at-top
      fused, report = partition(gm, self.options, kind)
      self.reports.append(report)
      compiled = make_boxed_func(_generated_forward(fused))
      if captured is not None and kind == "forward":
        captured.saw_forward(gm, compiled, direct_call(fused))
      elif captured is not None and kind == "backward":
        captured.saw_backward(gm, compiled, direct_call(fused))
      return compiled
    return compile_graph

  def __call__(self, gm: torch.fx.GraphModule, example_inputs):
    symbolic = _symbolic_inputs(example_inputs)
    if symbolic is not None:
      return _ShapeSpecializer(self, gm, *symbolic)
    return self._compile_static(gm, example_inputs)

  def _compile_static(self, gm: torch.fx.GraphModule, example_inputs):
    from torch._dynamo.backends.common import aot_autograd  # pylint: disable=g-import-not-at-top
    decompositions = {}
    if self.options.decompose:
      from torch._decomp import core_aten_decompositions  # pylint: disable=g-import-not-at-top
      from torch._decomp import decomposition_table  # pylint: disable=g-import-not-at-top
      decompositions = dict(core_aten_decompositions())
      for op in _torch_decompositions():
        decompositions[op] = decomposition_table[op]
    decompositions.update(_our_decompositions())
    partition_fn = (_min_cut_partition if self.options.partitioner == "min_cut"
                    else _default_partition)
    captured = training_runtime.Captured()
    compiler = aot_autograd(fw_compiler=self._compiler("forward", captured),
                            bw_compiler=self._compiler("backward", captured),
                            inference_compiler=self._compiler("inference"),
                            partition_fn=partition_fn,
                            decompositions=decompositions)
    compiled = compiler(gm, example_inputs)
    if captured.forward is None:
      return compiled  # An inference graph.
    lean = training_runtime.LeanTraining(compiled, captured,
                                         enabled=self.options.lean_runtime)
    self.training.append(lean)
    return lean


def _torch_decompositions():
  """Ops whose torch decomposition (outside its core ATen set) turns
  them into lowered ops: group norm and instance norm (batch norm without
  running statistics), adaptive average pooling (uneven windows too),
  Tensor.unfold (an as_strided of overlapping windows) and the index
  tables of triu_indices / tril_indices."""
  aten = torch.ops.aten
  return (aten.native_group_norm.default,
          aten._native_batch_norm_legit.no_stats,  # pylint: disable=protected-access
          aten._adaptive_avg_pool2d.default,  # pylint: disable=protected-access
          aten.unfold.default,
          aten.triu_indices.default,
          aten.tril_indices.default)


def _our_decompositions():
  """Ours, whatever the `decompose` option: training dropout's random
  draw, the CPU flash attention gradient, adaptive max pooling, the
  gradient of adaptive average pooling, median and kthvalue, sum / mean
  embedding bags and their gradient (see ops_nn). Read at each compile
  (tests replace them)."""
  aten = torch.ops.aten
  return {
      aten.native_dropout.default: ops_nn.dropout_decomposition,
      aten._scaled_dot_product_flash_attention_for_cpu_backward.default:  # pylint: disable=protected-access
          ops_nn.flash_attention_backward_decomposition,
      aten.adaptive_max_pool2d.default:
          ops_nn.adaptive_max_pool2d_decomposition,
      aten.adaptive_max_pool2d_backward.default:
          ops_nn.adaptive_max_pool2d_backward_decomposition,
      aten._adaptive_avg_pool2d_backward.default:  # pylint: disable=protected-access
          ops_nn.adaptive_avg_pool2d_backward_decomposition,
      aten.median.dim: ops_nn.median_dim_decomposition,
      aten.kthvalue.default: ops_nn.kthvalue_decomposition,
      aten._embedding_bag.default: ops_nn.embedding_bag_decomposition,  # pylint: disable=protected-access
      aten._embedding_bag_forward_only.default:  # pylint: disable=protected-access
          ops_nn.embedding_bag_decomposition,
      aten._embedding_bag_backward.default:  # pylint: disable=protected-access
          ops_nn.embedding_bag_backward_decomposition,
  }


# Shapes a graph captured with symbolic sizes is compiled for, at most (as
# torch's own recompile limit); further shapes run it eagerly.
MAX_SPECIALIZATIONS = 8


def _symbolic_inputs(example_inputs):
  """(indices of tensors with a symbolic size or stride, indices of
  symbolic scalars) of a graph's example inputs, or None when every input
  is static."""
  tensors, scalars = [], []
  for i, x in enumerate(example_inputs):
    if isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
      scalars.append(i)
    elif isinstance(x, torch.Tensor) and any(
        isinstance(d, torch.SymInt) for d in (*x.shape, *x.stride())):
      tensors.append(i)
  if not tensors and not scalars:
    return None
  return tuple(tensors), tuple(scalars)


class _ShapeSpecializer:
  """A graph that Dynamo captured with symbolic sizes (its automatic
  dynamic shapes mark a dimension dynamic once it changes between calls,
  unless `torch.compile(..., dynamic=False)`), compiled once per concrete
  shape: each new combination of the symbolic inputs' sizes and values is
  compiled as a static graph from the call's own arguments, as a shape
  change does under dynamic=False, and cached. Past MAX_SPECIALIZATIONS
  shapes the graph runs eagerly (a FallbackWarning says so)."""

  def __init__(self, owner: "Backend", gm: torch.fx.GraphModule,
               tensors: tuple[int, ...], scalars: tuple[int, ...]):
    self._owner = owner
    self._gm = gm
    self._tensors = tensors
    self._scalars = scalars
    self._compiled: dict[tuple, Callable] = {}
    self._eager: Callable | None = None

  def __call__(self, *args):
    key = (tuple((args[i].shape, args[i].stride()) for i in self._tensors) +
           tuple(args[i] for i in self._scalars))
    fn = self._compiled.get(key)
    if fn is None:
      if len(self._compiled) >= MAX_SPECIALIZATIONS:
        if self._eager is None:
          _fallback(self._owner.options,
                    f"graph with dynamic shapes: more than "
                    f"{MAX_SPECIALIZATIONS} shapes")
          self._eager = _generated_forward(self._gm)
        return self._eager(*args)
      fn = self._compiled[key] = self._owner._compile_static(  # pylint: disable=protected-access
          self._gm, list(args))
    return fn(*args)


def _min_cut_partition(joint, joint_inputs, **kwargs):
  """torch's min-cut partition, recomputing views in the backward rather
  than saving them. A view is free in torch, but a compiled cluster's
  output is a dense array: a saved transpose (`permute` of an activation
  that a weight gradient's matmul reads transposed) became a transposing
  copy in the forward program, one more output, and in the backward an
  input the matmul reads through a transpose anyway. Recomputed, the view
  is a free operand layout inside the backward's cluster."""
  from torch._functorch import config as functorch_config  # pylint: disable=g-import-not-at-top
  from torch._functorch import partitioners  # pylint: disable=g-import-not-at-top
  with functorch_config.patch(recompute_views=True):
    return partitioners.min_cut_rematerialization_partition(
        joint, joint_inputs, **kwargs)


def _default_partition(joint, joint_inputs, **kwargs):
  from torch._functorch import partitioners  # pylint: disable=g-import-not-at-top
  return partitioners.default_partition(joint, joint_inputs, **kwargs)


def backend(gm: torch.fx.GraphModule, example_inputs, options=None):
  """The `torch_dynamo_backends` entry point: `torch.compile(model,
  backend="openxla_stablehlo", options={...})`."""
  return Backend(options)(gm, example_inputs)


def register() -> None:
  """Registers the backend with Dynamo by name (what the entry point does
  for an installed wheel); harmless when already registered."""
  from torch._dynamo.backends import registry as dynamo_registry  # pylint: disable=g-import-not-at-top
  if BACKEND_NAME not in dynamo_registry.list_backends(exclude_tags=()):
    dynamo_registry.register_backend(backend, name=BACKEND_NAME)
