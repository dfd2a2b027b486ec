"""Move modules into method rooms and rewrite imports (one-off)."""
import os, re, subprocess, sys
from pathlib import Path

ROOT = Path(sys.argv[1])
MOVES = {
  "racer_jax.rl.policy": "racer_jax.walker.policy",
  "racer_jax.rl.rollout": "racer_jax.walker.rollout",
  "racer_jax.rl.reward": "racer_jax.walker.reward",
  "racer_jax.rl.losses": "racer_jax.walker.losses",
  "racer_jax.rl.walker_update": "racer_jax.walker.update",
  "racer_jax.rl.parallel": "racer_jax.runs.parallel",
  "racer_jax.graph.whole_graph": "racer_jax.walker.whole_graph",
  "racer_jax.graph.heuristics": "racer_jax.hygrl.heuristics",
  "racer_jax.graph.teacher": "racer_jax.hygrl.teacher",
  "racer_jax.runs.walker_inputs": "racer_jax.walker.inputs",
  "racer_jax.runs.walker_run": "racer_jax.walker.run",
  "racer_jax.train.walker_stage": "racer_jax.walker.stage",
  "racer_jax.eval.walker_eval": "racer_jax.walker.evaluation",
  "racer_jax.eval.eval_output": "racer_jax.runs.eval_output",
  "racer_jax.refine.refiner": "racer_jax.refiner.model",
  "racer_jax.refine.choice_scorer": "racer_jax.refiner.choice_scorer",
  "racer_jax.refine.refiner_update": "racer_jax.refiner.update",
  "racer_jax.runs.refiner_state": "racer_jax.refiner.state",
  "racer_jax.train.refiner_stage": "racer_jax.refiner.stage",
  "racer_jax.eval.refiner_eval": "racer_jax.refiner.evaluation",
}
TEST_MOVES = {"tests/rl": "tests/walker", "tests/refine": "tests/refiner",
              "tests/graph": "tests/hygrl"}

def path_of(mod):
  return ROOT / (mod.replace(".", "/") + ".py")

def git(*a):
  subprocess.run(["git", *a], cwd=ROOT, check=True)

# 1. move files
for new in {m.rsplit(".", 1)[0] for m in MOVES.values()}:
  d = path_of(new).with_suffix("")
  if not d.exists():
    d.mkdir(parents=True)
for old, new in MOVES.items():
  git("mv", str(path_of(old).relative_to(ROOT)), str(path_of(new).relative_to(ROOT)))
for old, new in TEST_MOVES.items():
  (ROOT / new).mkdir(exist_ok=True)
  for f in sorted((ROOT / old).iterdir()):
    if f.name == "__pycache__":
      continue
    target = ROOT / new / f.name
    if target.exists():
      continue
    git("mv", str(f.relative_to(ROOT)), str(target.relative_to(ROOT)))

# 2. rewrite imports
FROM = re.compile(r"^(?P<ind>[ \t]*)from (?P<mod>racer_jax[\w.]*) import (?P<names>\([^)]*\)|[^\n]*(?:\\\n[^\n]*)*)", re.M)

def parse_names(text):
  text = text.strip()
  if text.startswith("("):
    text = text[1:-1]
  text = text.replace("\\\n", " ")
  text = re.sub(r"#[^\n]*", "", text)
  out = []
  for part in text.split(","):
    part = part.strip()
    if not part:
      continue
    bits = part.split(" as ")
    out.append((bits[0].strip(), bits[1].strip() if len(bits) > 1 else None))
  return out

def render(ind, mod, names):
  items = [n if a is None or a == n else f"{n} as {a}" for n, a in names]
  line = f"{ind}from {mod} import {', '.join(items)}"
  if len(line) <= 80:
    return line
  body = "".join(f"{ind}  {i},\n" for i in items)
  return f"{ind}from {mod} import (\n{body}{ind})"

def rewrite(src):
  def repl(m):
    ind, mod, names = m.group("ind"), m.group("mod"), parse_names(m.group("names"))
    if mod in MOVES:              # from old.module import symbols
      return render(ind, MOVES[mod], names)
    groups, order = {}, []
    changed = False
    for n, a in names:
      full = f"{mod}.{n}"
      if full in MOVES:
        pkg, leaf = MOVES[full].rsplit(".", 1)
        local = a or n
        key = pkg
        groups.setdefault(key, []).append((leaf, local))
        changed = True
      else:
        groups.setdefault(mod, []).append((n, a))
      if (groups and list(groups)[-1] not in order):
        order.append(list(groups)[-1])
    if not changed:
      return m.group(0)
    lines = [render(ind, pkg, groups[pkg]) for pkg in groups]
    return "\n".join(lines)
  src = FROM.sub(repl, src)
  for old in sorted(MOVES, key=len, reverse=True):
    src = re.sub(re.escape(old) + r"(?![\w])", MOVES[old], src)
  return src

files = [p for d in ("racer_jax", "launch", "tests", "configs") for p in (ROOT / d).rglob("*.py")]
files += [ROOT / "README.md", ROOT / "setup.cfg", ROOT / ".ci" / "run"]
for p in files:
  if not p.exists():
    continue
  s = p.read_text()
  t = rewrite(s) if p.suffix == ".py" else s
  if p.suffix != ".py":
    for old in sorted(MOVES, key=len, reverse=True):
      t = re.sub(re.escape(old) + r"(?![\w])", MOVES[old], t)
  if t != s:
    p.write_text(t)
print("done")
