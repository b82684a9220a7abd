package reclaim

import "k8s.io/apimachinery/pkg/labels"

var everything = labels.Everything()
