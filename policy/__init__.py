"""The Pulumi policy pack (`pulumi preview --policy-pack policy/analyzer`); the policies are in `rules`."""
