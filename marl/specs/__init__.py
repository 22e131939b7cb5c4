"""Specs: the shape, dtype, device and domain of every tensor an env reads or writes.

A spec's ``shape`` always includes the env batch dimensions (and the agent
dimension for grouped data), so ``spec.rand()`` gives a tensor that could go
straight into the env. :class:`Composite` nests specs under (tuple) keys, and
its ``rand()``/``zero()`` return TensorDicts.

Examples:
    >>> import torch
    >>> from marl.specs import Bounded, Categorical, Composite
    >>> spec = Composite(
    ...     {"agents": Composite({"action": Categorical(5, shape=(4, 3))}, shape=(4, 3))},
    ...     shape=(4,),
    ... )
    >>> spec["agents", "action"].rand().shape
    torch.Size([4, 3])
    >>> spec.rand().batch_size
    torch.Size([4])
    >>> Bounded(-1.0, 1.0, shape=(2,)).project(torch.tensor([3.0, -0.5]))
    tensor([ 1.0000, -0.5000])
"""

# isort: off
# The API page lists these in the order they are imported here (mkdocstrings' "source"
# order): the order of the one-module marl/specs.py, base class first.
from marl.specs._base import TensorSpec
from marl.specs._leaves import Unbounded
from marl.specs._leaves import Bounded
from marl.specs._leaves import Categorical
from marl.specs._leaves import OneHot
from marl.specs._leaves import MultiCategorical
from marl.specs._leaves import Binary
from marl.specs._composite import Composite
from marl.specs._stack import stack_specs
# isort: on

# Names of the one-module marl.specs kept out of __all__ (and the API page); marl.envs
# imports NestedKey and structure_version from here. "X as X" marks a re-export.
from marl.specs._base import DeviceLike as DeviceLike
from marl.specs._base import NestedKey as NestedKey
from marl.specs._base import ShapeLike as ShapeLike
from marl.specs._composite import structure_version as structure_version
from marl.specs._stack import SpecLike as SpecLike

__all__ = [
    "Binary",
    "Bounded",
    "Categorical",
    "Composite",
    "MultiCategorical",
    "OneHot",
    "TensorSpec",
    "Unbounded",
    "stack_specs",
]
