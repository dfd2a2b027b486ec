"""GraphDancer's easy-to-hard curriculum: a biased sampler over the
structural difficulty of each training question.

Difficulty of a question (host side, once per split) combines

- ``hops``: the shortest hop distance from a question concept to a
  gold-choice concept on the capped whole graph within the walk's horizon
  (``racer_jax.walker.inputs.structural_features``); unreachable
  counts as the longest;
- ``degree``: the mean out-degree of its question concepts (more branches
  to choose from);
- ``seeds``: its number of question concepts (more starts to walk from);

each turned into a percentile rank in [0, 1] over the split, then mixed
with ``curriculum.weights`` and ranked again, so ``difficulty`` is a
percentile: 0 the easiest question, 1 the hardest.

At update ``s`` the *competence* ``c(s) = min(1, c0 + (1 - c0) · s /
(ramp · num_steps))`` (linear pacing; Platanios et al., 2019) sets the
sampling weight of a question to ``exp(-max(0, d - c) / τ)``: everything
at most as hard as ``c`` is equally likely, harder questions fade in as
``c`` grows, and after the ramp the sampler is uniform. A batch draws
``batch_size`` questions without replacement, from
``numpy.random.default_rng([seed, step])`` — so the batch of a step is a
function of ``(seed, step)`` and a resumed run is exact.
"""

from __future__ import annotations

import dataclasses

import numpy as np


def percentile_rank(x: np.ndarray) -> np.ndarray:
  """Average rank of each value scaled to [0, 1] (ties share a rank)."""
  x = np.asarray(x, np.float64)
  if x.size <= 1:
    return np.zeros_like(x)
  order = np.argsort(x, kind="stable")
  ranks = np.empty(x.size)
  ranks[order] = np.arange(x.size)
  # ties: the mean rank of their group
  _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
  sums = np.bincount(inverse, weights=ranks)
  return (sums / counts)[inverse] / (x.size - 1)


def difficulty(features: np.ndarray, weights) -> np.ndarray:
  """float64 [Q] in [0, 1]: the weighted mix of per-feature percentiles,
  itself as a percentile."""
  w = np.asarray(weights, np.float64)
  if w.shape != (features.shape[1],) or np.any(w < 0) or w.sum() == 0:
    raise ValueError(f"curriculum.weights must be {features.shape[1]} "
                     f"non-negative numbers, not all 0; got {weights}")
  mixed = sum(wi * percentile_rank(features[:, j]) for j, wi in enumerate(w))
  return percentile_rank(mixed / w.sum())


@dataclasses.dataclass(frozen=True)
class Schedule:
  start: float = 0.2          # c0: competence at step 0
  ramp_fraction: float = 0.5  # competence reaches 1 at this share of steps
  temperature: float = 0.1    # τ: how fast harder questions fade in

  def competence(self, step: int, num_steps: int) -> float:
    ramp = max(self.ramp_fraction * num_steps, 1.0)
    return float(min(1.0, self.start + (1 - self.start) * step / ramp))

  def weights(self, difficulty: np.ndarray, step: int, num_steps: int
              ) -> np.ndarray:
    c = self.competence(step, num_steps)
    return np.exp(-np.maximum(0.0, difficulty - c) /
                  max(self.temperature, 1e-6))


class CurriculumSampler:
  """``batch_for_step`` of a dataset with easy-to-hard bias (see the module
  docstring) over a one-shape dataset such as the walker's
  ``GoalDataset`` (``ids``, ``batch(positions, batch_size, rows)``).

  Args:
    features: float64 [Q, 3] per dataset row (hops, degree, seeds).
  """

  def __init__(self, dataset, features, schedule: Schedule,
               weights=(1.0, 0.5, 0.25), num_steps: int = 1):
    self.dataset, self.schedule, self.num_steps = dataset, schedule, num_steps
    self.features = np.asarray(features, np.float64)
    n = len(dataset.ids)
    if self.features.shape[0] != n:
      raise ValueError(f"{self.features.shape[0]} feature rows for a "
                       f"dataset of {n} questions")
    self.difficulty = difficulty(self.features, weights)

  def positions_for_step(self, step: int, seed: int, batch_size: int
                         ) -> np.ndarray:
    """The dataset rows of step ``step``, ascending."""
    w = self.schedule.weights(self.difficulty, step, self.num_steps)
    rng = np.random.default_rng([seed, step, 0xC0])
    rng.random()  # the draw that chose a shape bucket once: same batches
    k = min(batch_size, int(np.count_nonzero(w)))
    positions = rng.choice(len(w), size=k, replace=False, p=w / w.sum())
    return np.sort(positions)

  def batch_for_step(self, step: int, seed: int, batch_size: int,
                     rows: slice | None = None):
    return self.dataset.batch(self.positions_for_step(step, seed, batch_size),
                              batch_size, rows)

  def step_metrics(self, step: int, example_index) -> dict:
    """``curriculum_competence`` at ``step`` and the mean difficulty of the
    batch's questions (``example_index``: their split indices, the
    dataset's ``ids``, which are ascending)."""
    rows = np.searchsorted(self.dataset.ids, np.asarray(example_index))
    return {"curriculum_competence": np.float32(
        self.schedule.competence(step, self.num_steps)),
            "curriculum_difficulty": np.float32(
                self.difficulty[rows].mean() if rows.size else 0.0)}


def make_sampler(config, dataset, features_fn, log=print):
  """The training batch source: ``dataset`` itself (uniform epochs) or,
  with ``curriculum.enabled``, GraphDancer's easy-to-hard sampler over
  ``features_fn()`` (float [Q, 3], computed only then)."""
  cur = config.curriculum
  if not cur.enabled:
    return dataset
  sampler = CurriculumSampler(
      dataset, features_fn(),
      Schedule(start=cur.start, ramp_fraction=cur.ramp_fraction,
               temperature=cur.temperature),
      weights=tuple(cur.weights), num_steps=config.train.num_steps)
  f = sampler.features
  log(f"curriculum: {len(f)} questions, gold hops mean {f[:, 0].mean():.2f}, "
      f"seed degree mean {f[:, 1].mean():.1f}, seeds mean {f[:, 2].mean():.1f};"
      f" competence {cur.start} -> 1 by step "
      f"{int(cur.ramp_fraction * config.train.num_steps)}")
  return sampler


@dataclasses.dataclass(frozen=True)
class EasyToHard:
  """GraphDancer's own sampler over difficulty groups (its released
  ``E2HGaussianSampler`` with the bias mixture): at update ``t`` of ``T``
  the groups ``k = 0 .. K-1`` (easy to hard) get the Gaussian weights
  ``exp(-(x_t - k)² / 2σ²)``, ``x_t = (t / (T-1))^β · (K-1)``, normalized,
  mixed with a fixed bias ``q`` as ``(1-η_t) p + η_t q``, η_t linear from
  ``eta_start`` to ``eta_end``. The paper's run: β = 3, σ = 0.75,
  η 0.2 → 0.8, q = (0.5, 0.5, 0) over (easy, medium, hard).

  A batch's group counts are a multinomial draw, its questions drawn
  without replacement inside each group, all from
  ``numpy.random.default_rng([seed, t])``: a function of ``(seed, t)``,
  so a resumed run is exact (the released sampler walks each group with a
  cursor instead; the draws have the same distribution)."""
  beta: float = 3.0
  sigma: float = 0.75
  eta_start: float = 0.2
  eta_end: float = 0.8
  bias: tuple[float, ...] = (0.5, 0.5, 0.0)

  def probs(self, step: int, num_steps: int, groups: int) -> np.ndarray:
    """float64 [groups]: the groups' probabilities at ``step``."""
    frac = step / max(num_steps - 1, 1)
    x = (min(frac, 1.0) ** self.beta) * (groups - 1)
    p = np.exp(-((x - np.arange(groups)) ** 2) / (2 * self.sigma ** 2))
    p /= p.sum()
    q = np.asarray(self.bias, np.float64)[:groups]
    q = q / q.sum() if q.sum() > 0 else np.full(groups, 1.0 / groups)
    eta = self.eta_start + (self.eta_end - self.eta_start) * min(frac, 1.0)
    out = (1 - eta) * p + eta * q
    return out / out.sum()


def draw_batch(group_of: np.ndarray, batch_size: int, step: int,
               num_steps: int, seed: int,
               sampler: EasyToHard | None) -> np.ndarray:
  """int64 [batch_size] question indices for ``step``: by ``sampler`` over
  the groups (``group_of``: int [Q], 0 = easiest), or uniformly without
  replacement with ``sampler`` None (vanilla PPO). What a group too small
  for its draw cannot give is drawn uniformly from the other questions."""
  rng = np.random.default_rng([seed, step])
  n = len(group_of)
  if sampler is None:
    return rng.choice(n, size=min(batch_size, n), replace=False)
  groups = int(group_of.max()) + 1 if n else 1
  members = [np.flatnonzero(group_of == k) for k in range(groups)]
  p = sampler.probs(step, num_steps, groups)
  p = np.where([len(m) > 0 for m in members], p, 0.0)
  counts = rng.multinomial(min(batch_size, n), p / p.sum())
  picked = []
  for k in range(groups):
    take = min(int(counts[k]), len(members[k]))
    picked += [int(i) for i in rng.choice(members[k], size=take,
                                          replace=False)]
  short = min(batch_size, n) - len(picked)
  if short:   # a group had fewer questions than drawn: the rest, uniformly
    rest = np.setdiff1d(np.arange(n), picked)
    picked += [int(i) for i in rng.choice(rest, size=short, replace=False)]
  return np.asarray(picked, np.int64)
