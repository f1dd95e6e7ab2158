-- weights of fairness = 'round_robin' (docs/queues.md, "Fairness across groups"): JSON
-- text {group_key: weight}; a group of weight w is served w times as often as one of weight 1.
ALTER TABLE tenure_queues ADD COLUMN group_weights TEXT;
