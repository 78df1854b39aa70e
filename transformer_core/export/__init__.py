"""A trained model's checkpoint as another engine's model folder: CTranslate2 (``ctranslate2``)
and a Hugging Face transformers Marian folder (``transformers``) with its model card and the
facts it states (``card``), each written as a whole with a record of what it wrote, which a
later export checks before replacing it (``folder``)."""
