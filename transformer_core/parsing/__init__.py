"""Table 4, English constituency parsing: treebanks, linearized trees and EVALB scoring.

Modules, in pipeline order:

- ``trees``    Penn Treebank trees: reading, cleaning, Vinyals et al.'s linearization and back
- ``corpora``  WSJ (LDC layout), NLTK's sample, a parsed corpus, written as parallel files
- ``smoke``    the seeded generator of the small treebank the smoke scale parses instead of WSJ
- ``evalb_read`` EVALB's parameter file and its reading of one bracketed line
- ``evalb``    EVALB's bracket scores (COLLINS.prm semantics), its report reproduced exactly
"""
