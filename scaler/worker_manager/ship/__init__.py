"""What a cloud unit is sent so that it runs this build and the user's environment (docs/guide/bursting.md):
the distributions installed here (`distributions`), wheels of the local ones (`wheels`), the unit's Python and
platform (`unit_target`), and the plan of what a unit installs (`environment`)."""
