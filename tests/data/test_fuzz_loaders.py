"""Property tests: any file content gives a result or a DataError, never an
unhandled exception, and nothing is lost without being counted."""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from racer_jax.data import qa
from racer_jax.errors import DataError
from racer_jax.kg import ingest

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
_fragments = st.sampled_from([
    "\t", "\n", "/c/en/", "/c/fr/", "/r/IsA", "/r/HasA", "IsA", "dog", "x-ray",
    "{\"weight\": 1.0}", "{", "}", "1", "-1", "nan", "ice cream", "\r", " ",
    "\xe9", "_", "/n"])
_text = st.lists(st.one_of(_fragments, st.text(max_size=5)),
                 max_size=40).map("".join)


def _run(tmp_path, data: bytes, reader):
  path = tmp_path / "input"
  path.write_bytes(data)
  for mode in ("error", "skip"):
    try:
      result = reader(path, on_bad_line=mode)
    except DataError as e:
      assert e.path == str(path)
      if e.line is None:  # a file without one question, in either mode
        assert "holds no questions" in str(e)
      else:
        assert mode == "error" and e.line >= 1
      continue
    yield mode, result


@SETTINGS
@given(data=st.one_of(_text.map(str.encode), st.binary(max_size=200)))
def test_triple_files_never_crash(tmp_path, data):
  for mode, (triples, report) in _run(tmp_path, data,
                                      ingest.read_triple_files):
    dropped = sum(report.dropped.values())
    assert report.kept + dropped == report.lines
    assert len(triples.head) == report.kept


@SETTINGS
@given(data=st.one_of(_text.map(str.encode), st.binary(max_size=200)))
def test_assertions_never_crash(tmp_path, data):
  for mode, (triples, report) in _run(
      tmp_path, data, ingest.read_conceptnet_assertions):
    assert report.kept + sum(report.dropped.values()) == report.lines
    assert len(triples.head) == report.kept


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["id", "question", "stem", "choices", "label", "text",
                         "answerKey", "question_stem", "fact1"]), inner,
        max_size=5), max_leaves=20)


@SETTINGS
@given(records=st.lists(st.one_of(_json_values.map(json.dumps), _text),
                        max_size=6))
def test_qa_jsonl_never_crashes(tmp_path, records):
  data = "\n".join(records).encode()
  for mode, (examples, report) in _run(tmp_path, data, qa.load_jsonl):
    assert report.loaded + report.skipped + report.blank == report.lines
    assert len(examples) == report.loaded
