r"""Trains the walker (RACER's GraphAgent) or, with
``--config.method=hygrl``, HyGRL's beam-search policy (fusion calibration,
imitation stage, then SCST + margin).

  python launch/train.py --config=configs/demo.py --workdir=runs/demo
  python launch/train.py --config=configs/csqa.py --data_dir=DATA \
      --workdir=runs/csqa --config.train.num_steps=3000
  python launch/train.py --config=configs/csqa.py --data_dir=DATA \
      --workdir=runs/csqa_hygrl --config.method=hygrl
  python launch/train.py --config=configs/csqa.py --data_dir=DATA \
      --workdir=runs/csqa_refiner --config.train.stage=refiner \
      --config.refiner.walker_workdir=runs/csqa
  python launch/train.py --config=configs/csqa.py --data_dir=DATA \
      --workdir=runs/csqa_answer --config.train.stage=answer \
      --config.answer.knowledge_workdir=runs/csqa_refiner

Prepares the data if needed (cached under ``<workdir>/prep`` or
``--config.prep_dir``), trains with a progress bar, logs metrics to
``<workdir>/metrics.jsonl`` and TensorBoard event files, and checkpoints to
``<workdir>/checkpoints``. Re-running with the same workdir resumes.
"""

import json
import os

from absl import flags, logging
from ml_collections import config_flags

from racer_jax import entry_point
from racer_jax.runs import distributed
from racer_jax.train import run_stage

_CONFIG = config_flags.DEFINE_config_file(
    "config", os.path.join(os.path.dirname(__file__), "..", "configs",
                           "default.py"), "Configuration file.")
_DATA_DIR = flags.DEFINE_string(
    "data_dir", None, "Data directory (default: $RACER_DATA_DIR).")
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory.",
                               required=True)
_PROGRESS = flags.DEFINE_bool("progress", True, "Show progress bars.")
_COORDINATOR = flags.DEFINE_string(
    "coordinator_address", None, "Multi-process runs: host:port of process "
    "0 (default: $JAX_COORDINATOR_ADDRESS; unset = one process).")
_NUM_PROCESSES = flags.DEFINE_integer(
    "num_processes", None, "Multi-process runs: how many (default: "
    "$JAX_NUM_PROCESSES).")
_PROCESS_ID = flags.DEFINE_integer(
    "process_id", None, "Multi-process runs: this one's index (default: "
    "$JAX_PROCESS_ID).")
_AUTO = flags.DEFINE_bool(
    "distributed_auto", False, "Let JAX detect the cluster (TPU pods, "
    "SLURM, Open MPI) and call jax.distributed.initialize().")
_HEARTBEAT = flags.DEFINE_integer(
    "heartbeat_timeout_s", 100, "Multi-process runs: fail when a peer is "
    "silent this long.")


def main():
  logging.set_verbosity(logging.WARNING)  # orbax logs every save at INFO
  distributed.initialize(_COORDINATOR.value, _NUM_PROCESSES.value,
                         _PROCESS_ID.value, auto=_AUTO.value,
                         heartbeat_timeout_s=_HEARTBEAT.value)
  metrics = run_stage.train(_CONFIG.value, _DATA_DIR.value, _WORKDIR.value,
                            progress=_PROGRESS.value)
  if distributed.is_primary():
    print(json.dumps({"workdir": _WORKDIR.value, **metrics},
                     sort_keys=True))


if __name__ == "__main__":
  entry_point.run(main)
