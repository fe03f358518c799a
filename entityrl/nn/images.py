"""Images as tokens: a CNN per declared image whose output cells join the row's entities.

Each image of a row goes through its own convolutional encoder; every cell of the encoder's
output feature map, projected to ``d_model`` with a learned embedding of its position, becomes
one token of the row. The tokens sit after the row's entities (and after the global token), so
the actor and actee indices of the action masks, which count entities only, still point at the
same slots; attention, pooling, the value head and the memory then treat them as any other
entity of the row. See docs/images.md.

Two encoders (``net.image_encoder``):

* ``small``: 3x3 convolutions of stride 2 (16, then 32 channels), as many as it takes to bring
  both sides of the map to 8 cells or fewer: a 56x56 MiniGrid view becomes 7x7 tokens, a
  64x64 Procgen or Crafter frame 8x8. Cheap enough for a CPU.
* ``impala``: the residual encoder of IMPALA (Espeholt et al., 2018), which the ENN paper's
  Procgen comparison puts in front of its transformer: three stacks (16, 32, 32 channels) of a
  3x3 convolution, a 3x3 max-pool of stride 2 and two residual blocks; a 64x64 frame becomes
  8x8 tokens.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import torch
from torch import nn

from entityrl.env.spaces import Image
from entityrl.nn.embedding import _module_key
from entityrl.nn.kernels.pointwise import layer_norm
from entityrl.nn.layout import BatchLayout

ImageEncoderName = Literal["small", "impala"]
IMAGE_ENCODERS: tuple[ImageEncoderName, ...] = ("small", "impala")

# Where images sit in a batch layout's type positions: a prefix no entity type name carries in
# practice, so an image may share its name with an entity type.
_SLOT_PREFIX = "__image__"


def image_slot_name(name: str) -> str:
    """The key of image ``name``'s tokens in :attr:`BatchLayout.type_positions`."""
    return _SLOT_PREFIX + name


def _halved(size: int) -> int:
    """A side after a 3x3 window of stride 2 and padding 1."""
    return (size + 1) // 2


class SmallEncoder(nn.Sequential):
    """3x3 convolutions of stride 2 with ReLUs until both sides are at most 8 cells."""

    def __init__(self, shape: tuple[int, int, int]) -> None:
        height, width, channels = shape
        layers: list[nn.Module] = []
        inputs = channels
        while not layers or max(height, width) > 8:
            outputs = 16 if not layers else 32
            layers += [nn.Conv2d(inputs, outputs, 3, stride=2, padding=1), nn.ReLU()]
            inputs, height, width = outputs, _halved(height), _halved(width)
        super().__init__(*layers)
        self.out_channels = inputs
        self.out_cells = (height, width)


class _Residual(nn.Module):
    """ReLU, 3x3 convolution, ReLU, 3x3 convolution, plus the input."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv0 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv1(torch.relu(self.conv0(torch.relu(x))))


class ImpalaEncoder(nn.Sequential):
    """IMPALA's three stacks of convolution, max-pool (stride 2) and two residual blocks,
    then a ReLU."""

    def __init__(self, shape: tuple[int, int, int], depths: tuple[int, ...] = (16, 32, 32)) -> None:
        height, width, inputs = shape
        layers: list[nn.Module] = []
        for depth in depths:
            layers += [
                nn.Conv2d(inputs, depth, 3, padding=1),
                nn.MaxPool2d(3, stride=2, padding=1),
                _Residual(depth),
                _Residual(depth),
            ]
            inputs, height, width = depth, _halved(height), _halved(width)
        layers.append(nn.ReLU())
        super().__init__(*layers)
        self.out_channels = inputs
        self.out_cells = (height, width)


class _ImageTokenizer(nn.Module):
    """One image's encoder, the projection of its cells to ``d_model``, their positions."""

    def __init__(self, image: Image, d_model: int, encoder: ImageEncoderName) -> None:
        super().__init__()
        self.cnn = SmallEncoder(image.shape) if encoder == "small" else ImpalaEncoder(image.shape)
        height, width = self.cnn.out_cells
        self.cells = height * width
        self.scale = 1 / 255 if image.dtype == "uint8" else 1.0
        self.projection = nn.Linear(self.cnn.out_channels, d_model)
        self.position = nn.Parameter(torch.randn(self.cells, d_model) * 0.02)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """``(rows, height, width, channels)`` images -> ``(rows * cells, d_model)`` tokens,
        row after row, each row's cells in row-major order."""
        tokens = self.unnormalized(images)
        return layer_norm(tokens, self.norm.weight, self.norm.bias, self.norm.eps)

    def unnormalized(self, images: torch.Tensor) -> torch.Tensor:
        """The tokens before their layer norm (the exporters apply it with a fixed width, which
        traces to ONNX, where the kernel's entry point reads the width off the tensor)."""
        pixels = images.permute(0, 3, 1, 2).float() * self.scale
        cells = self.cnn(pixels).flatten(2).transpose(1, 2)  # (rows, cells, channels)
        return (self.projection(cells) + self.position).reshape(-1, self.position.shape[1])


class ImageTokens(nn.Module):
    """Every declared image's tokens, placed in their slots of the entity embeddings."""

    def __init__(
        self, images: Mapping[str, Image], d_model: int, encoder: ImageEncoderName
    ) -> None:
        super().__init__()
        self.names = list(images)
        self.tokenizers = nn.ModuleDict(
            {
                _module_key(name): _ImageTokenizer(image, d_model, encoder)
                for name, image in images.items()
            }
        )

    @property
    def cells(self) -> dict[str, int]:
        """Tokens per row of each image, by layout key (see :func:`image_slot_name`)."""
        return {
            image_slot_name(name): self.tokenizers[_module_key(name)].cells for name in self.names
        }

    def forward(
        self, images: Mapping[str, torch.Tensor], x: torch.Tensor, layout: BatchLayout
    ) -> torch.Tensor:
        """``x`` (the entity embeddings of every slot) with each image's tokens in its slots."""
        for name in self.names:
            tokens = self.tokenizers[_module_key(name)](images[name])
            x = x.index_copy(0, layout.type_positions[image_slot_name(name)], tokens.to(x.dtype))
        return x
