"""StableHLO portable artifacts: VHLO, versions, (de)serialization.

    from stablehlo._src import vhlo
    data = vhlo.serialize_portable_artifact(module, "1.15.0")
    module = vhlo.deserialize_portable_artifact(data)
    vhlo.get_current_version()  # "1.20.0"
"""

from stablehlo._src.vhlo.portable import deserialize_portable_artifact as deserialize_portable_artifact
from stablehlo._src.vhlo.portable import get_portable_artifact_version as get_portable_artifact_version
from stablehlo._src.vhlo.portable import serialize_portable_artifact as serialize_portable_artifact
from stablehlo._src.vhlo.version import CompatibilityRequirement as CompatibilityRequirement
from stablehlo._src.vhlo.version import get_current_version as get_current_version
from stablehlo._src.vhlo.version import get_minimum_version as get_minimum_version
from stablehlo._src.vhlo.version import get_smaller_version as get_smaller_version
from stablehlo._src.vhlo.version import get_version_from_compatibility_requirement as get_version_from_compatibility_requirement
from stablehlo._src.vhlo.version import Version as Version
from stablehlo._src.vhlo.versioning import UnsupportedAtTargetError as UnsupportedAtTargetError

# The name StableHLO's Python bindings use for the requirement enum.
StablehloCompatibilityRequirement = CompatibilityRequirement
