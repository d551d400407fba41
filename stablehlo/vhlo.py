"""Portable artifacts: VHLO, versions, (de)serialization.

    data = stablehlo.vhlo.serialize_portable_artifact(module, "1.15.0")
    module = stablehlo.vhlo.deserialize_portable_artifact(data)

Importing this module loads the VHLO dialect; `import stablehlo` does not.
"""

from stablehlo._src.vhlo import CompatibilityRequirement as CompatibilityRequirement
from stablehlo._src.vhlo import deserialize_portable_artifact as deserialize_portable_artifact
from stablehlo._src.vhlo import get_current_version as get_current_version
from stablehlo._src.vhlo import get_minimum_version as get_minimum_version
from stablehlo._src.vhlo import get_portable_artifact_version as get_portable_artifact_version
from stablehlo._src.vhlo import get_smaller_version as get_smaller_version
from stablehlo._src.vhlo import get_version_from_compatibility_requirement as get_version_from_compatibility_requirement
from stablehlo._src.vhlo import serialize_portable_artifact as serialize_portable_artifact
from stablehlo._src.vhlo import StablehloCompatibilityRequirement as StablehloCompatibilityRequirement
from stablehlo._src.vhlo import UnsupportedAtTargetError as UnsupportedAtTargetError
from stablehlo._src.vhlo import Version as Version

# Modules, for what the names above do not cover: `portable` (artifact
# framing), `version` (CURRENT, MINIMUM), `versioning` (upgrade / downgrade),
# `vhlo_ir` (the VHLO op tree), `unlegalize` (VHLO -> StableHLO) and
# `extern_constants` (constants stored outside the artifact).
from stablehlo._src.vhlo import extern_constants as extern_constants
from stablehlo._src.vhlo import portable as portable
from stablehlo._src.vhlo import unlegalize as unlegalize
from stablehlo._src.vhlo import version as version
from stablehlo._src.vhlo import versioning as versioning
from stablehlo._src.vhlo import vhlo_ir as vhlo_ir
