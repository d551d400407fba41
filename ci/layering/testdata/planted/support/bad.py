import json
import stablehlo.ir  # planted: support may not use stablehlo
