"""Data parallelism over a 1-D device mesh (axis ``"data"``).

Parameters and tables are replicated; every leaf of a batch is split along
its leading (question) axis. ``jit`` then runs the same program on every
device and reduces across them where the loss averages over the batch.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


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


def process_rows(batch_size: int) -> slice:
  """The rows of a global batch this process holds: the contiguous block
  its devices take under ``P("data")`` (all rows in a one-process run)."""
  n = jax.process_count()
  if batch_size % n:
    raise ValueError(f"batch size {batch_size} is not divisible by "
                     f"{n} processes")
  per = batch_size // n
  i = jax.process_index()
  return slice(i * per, (i + 1) * per)


def shard_batch(mesh: Mesh, tree, global_batch_size: int | None = None):
  """Splits every leaf along axis 0 (must divide by the mesh size).

  In a multi-process run ``tree`` holds only this process's rows
  (:func:`process_rows`) of a global batch of ``global_batch_size``."""
  size = mesh.devices.size
  leaves = jax.tree.leaves(tree)
  rows = leaves[0].shape[0] if leaves else 0
  total = global_batch_size or rows * jax.process_count()
  if total % size:
    raise ValueError(f"batch axis {total} is not divisible by "
                     f"{size} devices; choose batch.batch_size accordingly")
  sharding = NamedSharding(mesh, P("data"))
  if jax.process_count() == 1:
    return jax.device_put(tree, sharding)
  return jax.tree.map(lambda x: jax.make_array_from_process_local_data(
      sharding, np.asarray(x), (total,) + x.shape[1:]), tree)
