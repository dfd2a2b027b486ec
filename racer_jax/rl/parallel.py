"""Data parallelism over a 1-D device mesh (axis ``"data"``).

Parameters and tables are replicated; every leaf of a batch is split along
its leading (question) axis. ``jit`` then runs the same program on every
device and reduces across them where the loss averages over the batch.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P


def make_mesh(num_devices: int = 0) -> Mesh:
  """A mesh over the first ``num_devices`` devices (0: all of them)."""
  devices = jax.devices()
  if num_devices:
    if num_devices > len(devices):
      raise ValueError(f"asked for {num_devices} devices, have "
                       f"{len(devices)}")
    devices = devices[:num_devices]
  return Mesh(np.array(devices), ("data",))


def replicate(mesh: Mesh, tree):
  return jax.device_put(tree, NamedSharding(mesh, P()))


def shard_batch(mesh: Mesh, tree):
  """Splits every leaf along axis 0 (must divide by the mesh size)."""
  size = mesh.devices.size
  for leaf in jax.tree.leaves(tree):
    if leaf.shape[0] % size:
      raise ValueError(f"batch axis {leaf.shape[0]} is not divisible by "
                       f"{size} devices; choose batch.batch_size accordingly")
  return jax.device_put(tree, NamedSharding(mesh, P("data")))
