"""Settings for the whole test suite.

Loading this file puts tests/ on sys.path, so test modules import the shared helper modules
here (vec_env_checks) by name.
"""

import torch

# Tests run in parallel processes (pytest -n 2) on small machines; several torch threads per
# process would fight over the cores and make tiny networks many times slower.
torch.set_num_threads(1)
