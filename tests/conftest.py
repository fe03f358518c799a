"""Settings for the whole test suite."""

import torch

# Tests run in parallel processes (pytest -n 2) on small machines; several torch threads per
# process would fight over the cores and make tiny networks many times slower.
torch.set_num_threads(1)
