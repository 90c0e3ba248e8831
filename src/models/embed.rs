//! Sentence embeddings (BERT family, sentence-transformers semantics). Filled in next.
