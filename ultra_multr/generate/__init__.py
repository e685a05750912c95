"""Generated data, one module per kind, each written in the layout its reader expects.

* :mod:`.ultra_dataset`: a ULTRA data directory whose logging ranker scores with the true label plus noise
  (the **stress** group: the logger knows relevance the features lack);
* :mod:`.ultra_recipe`: a ULTRA data directory in ULTRA's own recipe (the logger is a Rank SVM trained on 1 %
  of the labelled queries, on the features the learner sees);
* :mod:`.web_letor`: a ULTRA data directory of web-LETOR-like features (sparse, heavy-tailed, correlated in
  groups, shifted per query) in ULTRA's recipe, or ordered by a logger that knows the labels;
* :mod:`.ultre_log`: logged sessions in ULTRA's ULTRE layout (``--click_model_dir``);
* :mod:`.baidu_log`: click and annotation files laid out as the Baidu-ULTR release writes them.
"""
