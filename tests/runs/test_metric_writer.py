"""The metrics log of a resumed run holds each step once (issue 39: a run
killed at step 150 and resumed from its checkpoint at 100 logged 125 and
150 twice)."""

import struct

from racer_jax.runs.metric_writer import MetricWriter, read_metrics


def test_a_resume_drops_the_rows_past_the_restored_step(tmp_path):
  first = MetricWriter(tmp_path, tensorboard=False)
  for step in (25, 50, 75, 100, 125, 150):
    first.write(step, {"loss": step / 100}, prefix="train/")
  first.write(100, {"hit": 0.5}, prefix="eval/")
  first.close()  # killed here; the newest checkpoint is step 100
  resumed = MetricWriter(tmp_path, tensorboard=False, start_step=100)
  assert [r["step"] for r in read_metrics(tmp_path)] == [25, 50, 75, 100,
                                                         100]
  for step in (125, 150, 175):
    resumed.write(step, {"loss": 0.0}, prefix="train/")
  resumed.close()
  steps = [r["step"] for r in read_metrics(tmp_path) if "train/loss" in r]
  assert steps == [25, 50, 75, 100, 125, 150, 175]


def test_a_fresh_start_in_a_used_folder_starts_a_fresh_log(tmp_path):
  old = MetricWriter(tmp_path, tensorboard=False)
  old.write(10, {"loss": 1.0})
  old.close()
  MetricWriter(tmp_path, tensorboard=False, start_step=0).close()
  assert read_metrics(tmp_path) == []


def _events(folder):
  """Every event of TensorBoard's files in ``folder`` (TFRecord framing:
  length, its CRC, the serialized Event, its CRC)."""
  from tensorboardX.proto import event_pb2
  out = []
  for path in sorted(folder.glob("events.out.tfevents.*")):
    data = path.read_bytes()
    i = 0
    while i < len(data):
      n = struct.unpack("<Q", data[i:i + 8])[0]
      event = event_pb2.Event()
      event.ParseFromString(data[i + 12:i + 12 + n])
      out.append(event)
      i += 12 + n + 4
  return out


def test_tensorboard_is_told_to_purge_the_replayed_steps(tmp_path):
  writer = MetricWriter(tmp_path, start_step=100)
  writer.write(101, {"loss": 1.0})
  writer.close()
  starts = [e.step for e in _events(tmp_path / "tensorboard")
            if e.HasField("session_log")]
  # a restart marker at 101: TensorBoard drops older events from 101 on
  assert starts == [101]
