from support import status
from xla.service import hlo  # planted
