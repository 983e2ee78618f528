"""The Pulumi policy pack (`pulumi preview --policy-pack policy`); the policies are in `rules`."""
