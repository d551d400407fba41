"""The VHLO op set: every versioned op, its version window and attributes.

One line per VHLO op definition of StableHLO 1.20.0
(`stablehlo/dialect/VhloOps.td`): `name min max : attributes`, where max
`-` means "current" and the attribute names are in declaration order.
Continuation lines (indented) carry on the attribute list. Operands, results
and regions are not listed: VHLO ops take any number of each, and the
conversions move them through unchanged.

Properties (bytecode >= 5) hold an op's declared attributes sorted by name;
everything else on the op is a discardable attribute.
"""

from __future__ import annotations

import dataclasses
import functools
import re

from stablehlo._src.vhlo import version as v

_TABLE = """
abs_v1 0.9.0 -
add_v1 0.9.0 -
after_all_v1 0.9.0 -
all_gather_v1 0.9.0 1.4.0 :
    all_gather_dim replica_groups channel_id use_global_device_ids
all_gather_v2 1.5.0 - :
    all_gather_dim replica_groups channel_id use_global_device_ids
all_reduce_v1 0.9.0 1.4.0 : replica_groups channel_id use_global_device_ids
all_reduce_v2 1.5.0 - : replica_groups channel_id use_global_device_ids
all_to_all_v1 0.9.0 1.4.0 :
    split_dimension concat_dimension split_count replica_groups channel_id
all_to_all_v2 1.5.0 - :
    split_dimension concat_dimension split_count replica_groups channel_id
and_v1 0.9.0 -
async_done_v1 1.15.0 -
async_start_v1 1.15.0 -
atan2_v1 0.9.0 -
batch_norm_grad_v1 0.9.0 - : epsilon feature_index
batch_norm_inference_v1 0.9.0 - : epsilon feature_index
batch_norm_training_v1 0.9.0 - : epsilon feature_index
bitcast_convert_v1 0.9.0 -
broadcast_in_dim_v1 0.9.0 - : broadcast_dimensions
broadcast_v1 0.9.0 - : broadcast_sizes
call_v1 0.9.0 - : callee
case_v1 0.9.0 -
cbrt_v1 0.9.0 1.9.0
cbrt_v2 1.10.0 - : result_accuracy
ceil_v1 0.9.0 -
cholesky_v1 0.9.0 - : lower
clamp_v1 0.9.0 -
collective_broadcast_v1 0.16.0 1.19.0 : replica_groups channel_id
collective_broadcast_v2 1.20.0 - : replica_groups channel_id has_dynamic_root
collective_permute_v1 0.9.0 - : source_target_pairs channel_id
collective_reduce_v1 1.19.0 - :
    replica_groups channel_id use_global_device_ids has_dynamic_root
compare_v1 0.9.0 - : comparison_direction compare_type
complex_v1 0.9.0 -
composite_v1 0.19.0 1.13.0 : name composite_attributes decomposition version
composite_v2 1.14.0 - : name composite_attributes decomposition version
concatenate_v1 0.9.0 - : dimension
constant_v1 0.9.0 - : value
convert_v1 0.9.0 -
convolution_v1 0.9.0 - :
    window_strides padding lhs_dilation rhs_dilation window_reversal
    input_batch_dimension input_feature_dimension input_spatial_dimensions
    kernel_input_feature_dimension kernel_output_feature_dimension
    kernel_spatial_dimensions output_batch_dimension output_feature_dimension
    output_spatial_dimensions feature_group_count batch_group_count
    precision_config
cosine_v1 0.9.0 1.9.0
cosine_v2 1.10.0 - : result_accuracy
count_leading_zeros_v1 0.9.0 -
create_token_v1 0.9.0 -
cross-replica-sum_v1 0.9.0 - : replica_groups
custom_call_v1 0.9.0 1.17.0 :
    call_target_name has_side_effect backend_config api_version
    called_computations operand_layouts result_layouts output_operand_aliases
custom_call_v2 1.18.0 - :
    call_target_name has_side_effect backend_config api_version
    called_computations operand_layouts result_layouts output_operand_aliases
    result_tilings
divide_v1 0.9.0 -
dot_general_v1 0.9.0 1.5.0 :
    lhs_batching_dimensions rhs_batching_dimensions lhs_contracting_dimensions
    rhs_contracting_dimensions precision_config
dot_general_v2 1.6.0 - :
    lhs_batching_dimensions rhs_batching_dimensions lhs_contracting_dimensions
    rhs_contracting_dimensions precision_config lhs_precision_type
    rhs_precision_type accumulation_type lhs_component_count
    rhs_component_count num_primitive_operations allow_imprecise_accumulation
dot_v1 0.9.0 - : precision_config
dynamic_broadcast_in_dim_v1 0.9.0 - :
    broadcast_dimensions known_expanding_dimensions
    known_nonexpanding_dimensions
dynamic_conv_v1 0.9.0 0.19.0 :
    window_strides padding lhs_dilation rhs_dilation window_reversal
    input_batch_dimension input_feature_dimension input_spatial_dimensions
    kernel_input_feature_dimension kernel_output_feature_dimension
    kernel_spatial_dimensions output_batch_dimension output_feature_dimension
    output_spatial_dimensions feature_group_count batch_group_count
    precision_config
dynamic_conv_v2 0.20.0 - :
    window_strides lhs_dilation rhs_dilation window_reversal
    input_batch_dimension input_feature_dimension input_spatial_dimensions
    kernel_input_feature_dimension kernel_output_feature_dimension
    kernel_spatial_dimensions output_batch_dimension output_feature_dimension
    output_spatial_dimensions feature_group_count batch_group_count
    precision_config
dynamic_gather_v1 0.9.0 1.0.0 :
    offset_dims collapsed_slice_dims start_index_map index_vector_dim
    indices_are_sorted
dynamic_gather_v2 1.1.0 - :
    offset_dims collapsed_slice_dims operand_batching_dims
    start_indices_batching_dims start_index_map index_vector_dim
    indices_are_sorted
dynamic_iota_v1 0.9.0 - : iota_dimension
dynamic_pad_v1 0.9.0 -
dynamic_reshape_v1 0.9.0 -
dynamic_slice_v1 0.9.0 - : slice_sizes
dynamic_update_slice_v1 0.9.0 -
einsum_v1 0.9.0 - : einsum_config
exponential_minus_one_v1 0.9.0 1.9.0
exponential_minus_one_v2 1.10.0 - : result_accuracy
exponential_v1 0.9.0 1.8.0
exponential_v2 1.9.0 - : result_accuracy
fft_v1 0.9.0 - : fft_type fft_length
floor_v1 0.9.0 -
func_v1 0.9.0 - : sym_name function_type sym_visibility arg_attrs res_attrs
gather_v1 0.9.0 1.0.0 :
    offset_dims collapsed_slice_dims start_index_map index_vector_dim
    slice_sizes indices_are_sorted
gather_v2 1.1.0 - : offset_dims collapsed_slice_dims operand_batching_dims
    start_indices_batching_dims start_index_map index_vector_dim slice_sizes
    indices_are_sorted
get_dimension_size_v1 0.9.0 - : dimension
get_tuple_element_v1 0.9.0 - : index
if_v1 0.9.0 -
imag_v1 0.9.0 -
infeed_v1 0.9.0 - : infeed_config layout
iota_v1 0.9.0 - : iota_dimension
is_finite_v1 0.9.0 -
log_plus_one_v1 0.9.0 1.9.0
log_plus_one_v2 1.10.0 - : result_accuracy
log_v1 0.9.0 1.9.0
log_v2 1.10.0 - : result_accuracy
logistic_v1 0.9.0 1.9.0
logistic_v2 1.10.0 - : result_accuracy
map_v1 0.9.0 - : dimensions
maximum_v1 0.9.0 -
minimum_v1 0.9.0 -
multiply_v1 0.9.0 -
negate_v1 0.9.0 -
not_v1 0.9.0 -
optimization_barrier_v1 0.9.0 -
or_v1 0.9.0 -
outfeed_v1 0.9.0 - : outfeed_config
pad_v1 0.9.0 - : edge_padding_low edge_padding_high interior_padding
partition_id_v1 0.9.0 -
popcnt_v1 0.9.0 -
power_v1 0.9.0 -
real_dynamic_slice_v1 0.9.0 -
real_v1 0.9.0 -
recv_v1 0.9.0 1.11.0 : channel_id channel_type is_host_transfer
recv_v2 1.12.0 - :
    channel_id channel_type is_host_transfer source_target_pairs
reduce_precision_v1 0.9.0 - : exponent_bits mantissa_bits
reduce_scatter_v1 0.9.0 - :
    scatter_dimension replica_groups channel_id use_global_device_ids
reduce_v1 0.9.0 - : dimensions
reduce_window_v1 0.9.0 - :
    window_dimensions window_strides base_dilations window_dilations padding
remainder_v1 0.9.0 -
replica_id_v1 0.9.0 -
reshape_v1 0.9.0 -
return_v1 0.9.0 -
reverse_v1 0.9.0 - : dimensions
rng_bit_generator_v1 0.9.0 - : rng_algorithm
rng_v1 0.9.0 - : rng_distribution
round_nearest_afz_v1 0.9.0 -
round_nearest_even_v1 0.9.0 -
rsqrt_v1 0.9.0 1.9.0
rsqrt_v2 1.10.0 - : result_accuracy
scatter_v1 0.9.0 1.0.0 :
    update_window_dims inserted_window_dims scatter_dims_to_operand_dims
    index_vector_dim indices_are_sorted unique_indices
scatter_v2 1.1.0 - :
    update_window_dims inserted_window_dims input_batching_dims
    scatter_indices_batching_dims scatter_dims_to_operand_dims
    index_vector_dim indices_are_sorted unique_indices
select_and_scatter_v1 0.9.0 - : window_dimensions window_strides padding
select_v1 0.9.0 -
send_v1 0.9.0 1.11.0 : channel_id channel_type is_host_transfer
send_v2 1.12.0 - :
    channel_id channel_type is_host_transfer source_target_pairs
set_dimension_size_v1 0.9.0 - : dimension
shift_left_v1 0.9.0 -
shift_right_arithmetic_v1 0.9.0 -
shift_right_logical_v1 0.9.0 -
sign_v1 0.9.0 -
sine_v1 0.9.0 1.9.0
sine_v2 1.10.0 - : result_accuracy
slice_v1 0.9.0 - : start_indices limit_indices strides
sort_v1 0.9.0 - : dimension is_stable
sqrt_v1 0.9.0 1.9.0
sqrt_v2 1.10.0 - : result_accuracy
subtract_v1 0.9.0 -
tan_v1 1.4.0 1.9.0
tan_v2 1.10.0 - : result_accuracy
tanh_v1 0.9.0 1.9.0
tanh_v2 1.10.0 - : result_accuracy
torch_index_select_v1 0.9.0 - : dim batch_dims
transpose_v1 0.9.0 - : permutation
triangular_solve_v1 0.9.0 - : left_side lower unit_diagonal transpose_a
tuple_v1 0.9.0 -
unary_einsum_v1 0.9.0 - : einsum_config
uniform_dequantize_v1 0.9.0 -
uniform_quantize_v1 0.9.0 -
while_v1 0.9.0 -
xor_v1 0.9.0 -
"""


@dataclasses.dataclass(frozen=True)
class OpDef:
  """One VHLO op: `vhlo.<name>`, e.g. `vhlo.dot_general_v2`."""
  name: str  # Without the "vhlo." prefix.
  base: str  # The name without the "_vN" suffix.
  number: int  # N.
  min_version: v.Version
  max_version: v.Version | None  # None: still current.
  attributes: tuple  # Declared attribute names, declaration order.

  @property
  def full_name(self) -> str:
    return "vhlo." + self.name

  @functools.cached_property
  def property_names(self) -> tuple:
    """The declared attributes in the order properties store them."""
    return tuple(sorted(self.attributes))

  def supports(self, target: v.Version) -> bool:
    target = target.without_patch()
    return (self.min_version <= target and
            (self.max_version is None or target <= self.max_version))


def _parse_table(text: str) -> dict:
  ops = {}
  rows = []
  for line in text.splitlines():
    if not line.strip():
      continue
    if line[0].isspace():
      rows[-1] += " " + line.strip()
    else:
      rows.append(line)
  for row in rows:
    head, _, attrs = row.partition(" : ")
    name, lo, hi = head.split()
    m = re.fullmatch(r"(.+)_v([0-9]+)", name)
    ops[name] = OpDef(
        name=name, base=m.group(1), number=int(m.group(2)),
        min_version=v.Version.parse(lo),
        max_version=None if hi == "-" else v.Version.parse(hi),
        attributes=tuple(attrs.split()))
  return ops


OPS: dict = _parse_table(_TABLE)

# base name -> its definitions, oldest first.
VERSIONS: dict = {}
for _op in sorted(OPS.values(), key=lambda o: o.number):
  VERSIONS.setdefault(_op.base, []).append(_op)
# `vhlo.<name>` -> its definition (what lookup finds first).
_BY_FULL_NAME = {"vhlo." + name: d for name, d in OPS.items()}

# VHLO base names whose StableHLO counterpart lives in another dialect.
_UPSTREAM_NAMES = {"func": "func.func", "call": "func.call"}


def lookup(name: str) -> OpDef | None:
  """The definition of `vhlo.<name>` (the prefix is optional)."""
  found = _BY_FULL_NAME.get(name)
  if found is not None:
    return found
  if name.startswith("vhlo."):
    return OPS.get(name[5:])
  return OPS.get(name)


def latest(base: str) -> OpDef | None:
  """The current (newest) definition of a VHLO base name."""
  defs = VERSIONS.get(base)
  return defs[-1] if defs else None


def for_target(base: str, target: v.Version) -> OpDef | None:
  """The definition of `base` that `target` supports, or None."""
  for op in reversed(VERSIONS.get(base, ())):
    if op.supports(target):
      return op
  return None


def stablehlo_name(base: str) -> str:
  """The StableHLO-side op name of a VHLO base name (return: see caller)."""
  return _UPSTREAM_NAMES.get(base, "stablehlo." + base)


_VHLO_BASES: dict = {}


def vhlo_base(stablehlo_op_name: str) -> str | None:
  """The VHLO base name of a StableHLO / func op name, None if it has none."""
  base = _VHLO_BASES.get(stablehlo_op_name)
  if base is None:
    base = _vhlo_base(stablehlo_op_name)
    if base is not None and len(_VHLO_BASES) < 4096:
      _VHLO_BASES[stablehlo_op_name] = base
  return base


def _vhlo_base(stablehlo_op_name: str) -> str | None:
  if stablehlo_op_name in ("func.return", "stablehlo.return"):
    return "return"
  for base, name in _UPSTREAM_NAMES.items():
    if name == stablehlo_op_name:
      return base
  if stablehlo_op_name.startswith("stablehlo."):
    base = stablehlo_op_name[len("stablehlo."):]
    if base in VERSIONS and base not in _UPSTREAM_NAMES:
      return base
  return None
