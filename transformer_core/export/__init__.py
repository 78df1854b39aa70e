"""A trained model's checkpoint as another engine's model folder: CTranslate2 (``ctranslate2``)
and a Hugging Face transformers Marian folder (``transformers``), each written as a whole with
a record of what it wrote, which a later export checks before replacing it (``folder``)."""
