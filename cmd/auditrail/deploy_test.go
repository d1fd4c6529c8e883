package main

import "testing"

func checkDeployFiles(t *testing.T, s scrape) { t.Helper() }
