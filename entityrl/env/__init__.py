"""The environment API: what a simulator implements and how batches of it travel.

numpy only; importing this package never imports torch.
"""

from entityrl.env.batched import BatchedEnvironment
from entityrl.env.batching import Batcher
from entityrl.env.environment import Environment, NativeStepping
from entityrl.env.observation import (
    Action,
    ActionMask,
    CategoricalAction,
    CategoricalActionMask,
    ContinuousAction,
    ContinuousActionMask,
    EntityID,
    GlobalCategoricalAction,
    GlobalCategoricalActionMask,
    GlobalContinuousAction,
    GlobalContinuousActionMask,
    Observation,
    SelectEntityAction,
    SelectEntityActionMask,
)
from entityrl.env.process_vec_env import EnvWorkerError, ProcessVecEnv
from entityrl.env.random_policy import RandomPolicy
from entityrl.env.spaces import (
    ActionSpace,
    CategoricalActionSpace,
    ContinuousActionSpace,
    Entity,
    GlobalCategoricalActionSpace,
    GlobalContinuousActionSpace,
    Image,
    ObsSpace,
    SelectEntityActionSpace,
)
from entityrl.env.validator import (
    EnvValidationError,
    ValidatingEnvironment,
    validate_observation,
    validate_spaces,
    validate_vec_obs,
)
from entityrl.env.vec_env import EnvFactory, EpisodeTracker, SerialVecEnv, VecEnv
from entityrl.env.vec_obs import (
    VecActionMask,
    VecCategoricalMask,
    VecContinuousMask,
    VecObs,
    VecSelectEntityMask,
)
from entityrl.ragged import RaggedArray

__all__ = [
    "Action",
    "ActionMask",
    "ActionSpace",
    "BatchedEnvironment",
    "Batcher",
    "CategoricalAction",
    "CategoricalActionMask",
    "CategoricalActionSpace",
    "ContinuousAction",
    "ContinuousActionMask",
    "ContinuousActionSpace",
    "Entity",
    "EntityID",
    "EnvFactory",
    "EnvValidationError",
    "EnvWorkerError",
    "Environment",
    "EpisodeTracker",
    "GlobalCategoricalAction",
    "GlobalCategoricalActionMask",
    "GlobalCategoricalActionSpace",
    "GlobalContinuousAction",
    "GlobalContinuousActionMask",
    "GlobalContinuousActionSpace",
    "Image",
    "NativeStepping",
    "ObsSpace",
    "Observation",
    "ProcessVecEnv",
    "RaggedArray",
    "RandomPolicy",
    "SelectEntityAction",
    "SelectEntityActionMask",
    "SelectEntityActionSpace",
    "SerialVecEnv",
    "ValidatingEnvironment",
    "VecActionMask",
    "VecCategoricalMask",
    "VecContinuousMask",
    "VecEnv",
    "VecObs",
    "VecSelectEntityMask",
    "validate_observation",
    "validate_spaces",
    "validate_vec_obs",
]
