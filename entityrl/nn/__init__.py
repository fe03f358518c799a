"""RogueNet, the ragged-batch transformer policy (torch)."""

from entityrl.nn.embedding import TranslationConfig
from entityrl.nn.flops import flops, param_count
from entityrl.nn.heads import HeadOutput
from entityrl.nn.relpos import RelposConfig
from entityrl.nn.rogue_net import PolicyOutput, PreparedBatch, RogueNet, RogueNetConfig

__all__ = [
    "HeadOutput",
    "PolicyOutput",
    "PreparedBatch",
    "RelposConfig",
    "RogueNet",
    "RogueNetConfig",
    "TranslationConfig",
    "flops",
    "param_count",
]
