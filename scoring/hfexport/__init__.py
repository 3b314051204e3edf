"""A campaign's judgments, or a release's, as a Hugging Face dataset folder: JSONL splits that
`datasets.load_dataset(<folder>)` reads without code, and a dataset card (README.md) written
from the campaign's own records. Written with the standard library only: `datasets` is a test
dependency, never needed to export (README, "Hugging Face datasets")."""
