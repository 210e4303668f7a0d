"""citekeeper.answers.anchoring's search for the occurrence of a quote nearest the RAG system's offset hint,
against a brute force over every occurrence."""

from hypothesis import given, settings
from hypothesis import strategies as st

from citekeeper.answers.anchoring import _nearest

texts = st.text(alphabet="ab中", max_size=40)
quotes = st.text(alphabet="ab中", min_size=1, max_size=3)


@settings(max_examples=2000, deadline=None)
@given(texts, quotes, st.none() | st.integers(min_value=0, max_value=45))
def test_the_nearest_occurrence_to_the_hint(text, quote, hint):
    occurrences = [i for i in range(len(text)) if text.startswith(quote, i)]
    found = _nearest(text, quote, hint)
    if not occurrences:
        assert found is None
    elif hint is None:
        assert found == occurrences[0]
    else:
        assert found in occurrences
        assert abs(found - hint) == min(abs(i - hint) for i in occurrences)
