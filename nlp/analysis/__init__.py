"""What a trained translator shows when looked at: its corpus BLEU and chrF in bounded memory
(:mod:`~nlp.analysis.corpus_scores`), the scores and sacreBLEU signatures of
``nlp.evaluate`` (:mod:`~nlp.analysis.sacrebleu_report`) and its scores by source length
(:mod:`~nlp.analysis.bleu_by_length`), the cross-attention alignment of
``nlp.translate --attention`` (:mod:`~nlp.analysis.alignment`) and the labelled heatmaps it and
the walkthrough draw (:mod:`~nlp.analysis.heatmap`)."""
