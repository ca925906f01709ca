"""A team's model fleet in one worker: two models, a canary, a shadow, a deploy without a restart."""
