"""The TF-IDF cosine baseline (scikit-learn's ``TfidfVectorizer``) as a model of the commands that score pairs
(``--model tfidf``). What it is fitted on is part of every score: a calibrated TF-IDF folder keeps its fit on the
calibration file's questions, so its thresholds hold elsewhere; plain ``tfidf`` is fitted on the questions scored.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from core.model_names import TFIDF


class TfidfScorer:
    """Scores pairs by the cosine of their TF-IDF vectors; fitted, or not (each call fits on its own questions)."""

    model_type = TFIDF

    def __init__(self, vectorizer=None, fitted: bool = False):
        self.vectorizer = vectorizer  # a fitted TfidfVectorizer; None for no fit, or a fit without a word (scores 0)
        self.fitted = fitted or vectorizer is not None

    @classmethod
    def fit(cls, texts: Sequence[str]) -> "TfidfScorer":
        """Fitted on ``texts`` (a question per entry, repeats counted)."""
        from sklearn.feature_extraction.text import TfidfVectorizer

        vectorizer = TfidfVectorizer()
        try:
            vectorizer.fit([str(text) for text in texts])
        except ValueError:  # no text holds a word
            return cls(fitted=True)
        return cls(vectorizer)

    @classmethod
    def fit_chunks(cls, chunks: Iterable[Sequence[str]]) -> "TfidfScorer":
        """``fit`` on all the chunks' texts, counted a chunk at a time: the texts never sit in memory at once."""
        from sklearn.feature_extraction.text import CountVectorizer

        frequencies, documents = Counter(), 0
        for texts in chunks:
            texts = [str(text) for text in texts]
            documents += len(texts)
            counter = CountVectorizer(binary=True)  # TfidfVectorizer's analyzer: the same defaults
            try:
                present = counter.fit_transform(texts)
            except ValueError:  # no word in this chunk
                continue
            frequencies.update(dict(zip(counter.get_feature_names_out().tolist(),
                                        np.asarray(present.sum(axis=0)).ravel().tolist())))
        words = sorted(frequencies)
        df = np.array([frequencies[w] for w in words], dtype=np.float64)
        # scikit-learn's smoothed IDF, as TfidfTransformer.fit computes it: ln((1 + n) / (1 + df)) + 1
        return cls.from_weights(words, np.log((documents + 1) / (df + 1.0)) + 1.0)

    @classmethod
    def from_weights(cls, words: list[str], idf) -> "TfidfScorer":
        from sklearn.feature_extraction.text import TfidfVectorizer

        if not words:
            return cls(fitted=True)
        vectorizer = TfidfVectorizer(vocabulary={word: index for index, word in enumerate(words)})
        vectorizer.idf_ = np.asarray(idf, dtype=np.float64)
        return cls(vectorizer)

    def score_pairs(self, first: Sequence[str], second: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        """(N,) cosine of the TF-IDF vectors of each (first[i], second[i]); ``batch_size`` is ignored."""
        first, second = [str(t) for t in first], [str(t) for t in second]
        if not self.fitted:
            return TfidfScorer.fit(first + second).score_pairs(first, second)
        if self.vectorizer is None or not first:
            return np.zeros(len(first))
        a, b = self.vectorizer.transform(first), self.vectorizer.transform(second)  # rows of unit length
        return np.asarray(a.multiply(b).sum(axis=1), dtype=np.float64).ravel()

    def to_dict(self) -> dict:
        """The fit as JSON: ``{"vocabulary": [words in column order], "idf": [weights]}``."""
        if self.vectorizer is None:
            return {"vocabulary": [], "idf": []}
        return {"vocabulary": self.vectorizer.get_feature_names_out().tolist(),
                "idf": self.vectorizer.idf_.tolist()}

    @classmethod
    def from_dict(cls, data, where: str) -> "TfidfScorer":
        """``to_dict``'s value read back; ValueError naming ``where`` when it is not one."""
        words = data.get("vocabulary") if isinstance(data, dict) else None
        idf = data.get("idf") if isinstance(data, dict) else None
        if not (isinstance(words, list) and isinstance(idf, list) and len(words) == len(idf)):
            raise ValueError(f"{where} must hold a vocabulary and as many IDF weights")
        if not all(isinstance(word, str) and word for word in words) or len(set(words)) != len(words):
            raise ValueError(f"{where}: the vocabulary must be distinct non-empty words")
        weights = np.asarray([w if isinstance(w, (int, float)) and not isinstance(w, bool) else np.nan for w in idf],
                             dtype=np.float64)
        if not np.isfinite(weights).all() or (weights < 1.0).any():
            raise ValueError(f"{where}: every IDF weight must be a finite number of at least 1")
        return cls.from_weights(words, weights)


def fit_on_file(source: str | Path, columns: dict[str, str] | None = None,
                names: list[str] | None = None) -> TfidfScorer:
    """Fitted on the questions of a file's pairs that ``score`` scores, read chunk by chunk by its reader."""
    from core.data.reading import PairReader

    reader = PairReader(Path(source), columns, labels_required=False, all_text=True, names=names)

    def questions():
        for chunk in reader:
            usable = ((chunk.question1 != "") & (chunk.question2 != "")).to_numpy()
            yield chunk.question1[usable].tolist() + chunk.question2[usable].tolist()

    return TfidfScorer.fit_chunks(questions())


def folder_of_type(source: str | Path, model_type: str) -> bool:
    """Whether ``source`` is a folder whose config.json names ``model_type`` (False for an unusable folder: the
    loader that tries it says why)."""
    from core.saving import ModelLoadError, read_config

    try:
        return Path(source).is_dir() and read_config(source).get("model_type") == model_type
    except ModelLoadError:
        return False


def is_tfidf(source: str | Path) -> bool:
    """Whether a ``--model`` value is the TF-IDF baseline: ``tfidf``, or a folder holding a calibrated one."""
    return str(source) == TFIDF or folder_of_type(source, TFIDF)


def saved_fit(folder: Path, again: str) -> TfidfScorer:
    """The TF-IDF fit kept in ``folder``; ModelLoadError, one line, saying to run ``again`` when it is missing."""
    from core.saving import VOCAB_MAX_BYTES, ModelLoadError, read_json_file
    from core.saving.model_folder import TFIDF_FILE

    path = folder / TFIDF_FILE
    try:
        return TfidfScorer.from_dict(read_json_file(path, VOCAB_MAX_BYTES, folder=folder), str(path))
    except FileNotFoundError:
        raise ModelLoadError(f"{folder} has no {TFIDF_FILE}; {again}") from None
    except ValueError as error:  # ModelLoadError included
        raise ModelLoadError(str(error)) from None


def load_tfidf(source: str | Path) -> tuple[TfidfScorer, dict]:
    """(scorer, config) of ``tfidf`` or of a calibrated TF-IDF folder; ModelLoadError for a folder that is not one."""
    from core.saving import ModelLoadError, read_config
    from core.saving.model_folder import CALIBRATED_FROM, is_calibrated

    if str(source) == TFIDF:
        return TfidfScorer(), {"model_type": TFIDF, "name": "TF-IDF cosine", "thresholds": {}}
    folder = Path(source)
    config = read_config(folder)
    if config.get("model_type") != TFIDF or not is_calibrated(config) or config[CALIBRATED_FROM]["source"] != TFIDF:
        raise ModelLoadError(f"{folder} is not a calibrated TF-IDF baseline")
    return saved_fit(folder, "calibrate the baseline again"), config
