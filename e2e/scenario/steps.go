// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/klient/k8s"

	"liken.sh/per-node/e2e/internal/harness"
)

// storeLabel selects the guide's store pods.
const storeLabel = "app=store"

// storeSelector selects the store pods of the scenario: the guide's, or
// those of the example it applied (apply the example).
func (r *Run) storeSelector() string {
	if r.store != "" {
		return r.store
	}
	return storeLabel
}

// writeTimeout is the floor of every step that writes through the store: a
// write is acknowledged once every peer holds it, so on a loaded machine it
// waits on the slowest pod (a cold CI run saw 100,000 records in bulk take
// longer than 30 s on a 2-core machine at 0 % idle). A step that hits it
// says the observation failed, not that a promise broke.
const writeTimeout = 2 * time.Minute

// kubeletDir is kubelet's directory on the kind nodes.
const kubeletDir = "/var/lib/kubelet"

var vocabulary = compile([]*stepDef{
	{Name: "apply {path}", Timeout: 30 * time.Second, run: stepApplyFile},
	{Name: "apply the example {path}", Timeout: 30 * time.Second, run: stepApplyExample},
	{Name: "pick a nats pod", Timeout: 2 * time.Minute, Defines: true, run: stepPickNatsPod},
	{Name: "pick a worker without a nats pod", Timeout: 30 * time.Second, Defines: true, run: stepWorkerWithoutNats},
	{Name: "the nats pod on {node} stays not ready", Timeout: time.Minute, run: stepNatsNotReady},
	{Name: "delete the nats pod on {node}", Timeout: 30 * time.Second, run: stepDeleteNatsPodOn},
	{Name: "nats acknowledges {n} messages", Timeout: 2 * time.Minute, run: stepNatsAcknowledges},
	{Name: "the nats server on {node} holds every acknowledged message", Timeout: 2 * time.Minute, run: stepNatsHoldsAll},
	{Name: "the nats server on {node} holds no message", Timeout: 30 * time.Second, run: stepNatsHoldsNothing},
	{Name: "every nats server holds every acknowledged message", Timeout: 2 * time.Minute, run: stepEveryNatsHoldsAll},
	{Name: "start a nats writer", Timeout: time.Minute, run: stepStartNatsWriter},
	{Name: "stop the nats writer, keeping what nats acknowledged", Timeout: time.Minute, run: stepStopNatsWriter},
	{Name: "the nats server on {node} restored {n} messages from its copy", Timeout: 2 * time.Minute, run: stepNatsRestored},
	{Name: "remove the nats server of {node} from jetstream", Timeout: 30 * time.Second, run: stepNatsPeerRemove},
	{Name: "wait deployment {name} ready {n}", Timeout: 2 * time.Minute, run: stepDeploymentReady},
	{Name: "scale deployment {name} to {n}", Timeout: 30 * time.Second, run: stepScale},
	{Name: "restart deployment {name}", Timeout: 30 * time.Second, run: stepRolloutRestart},
	{Name: "set deployment {name} to leave a node that stops answering after {seconds} seconds", Timeout: 30 * time.Second, run: stepLeaveNotReadyAfter},
	{Name: "wait until {n} store pods are ready", Timeout: 2 * time.Minute, run: stepReadyStorePodsCount},
	{Name: "set deployment {name} to replace pods without surge", Timeout: 30 * time.Second, run: stepNoSurge},
	{Name: "pick a store pod", Timeout: 30 * time.Second, Defines: true, run: stepPickStorePod},
	{Name: "pick a store pod other than {pod}", Timeout: 30 * time.Second, Defines: true, run: stepPickOtherPod},
	{Name: "pick a pending store pod", Timeout: 30 * time.Second, Defines: true, run: stepPickPendingPod},
	{Name: "pick the node of {pod}", Timeout: 30 * time.Second, Defines: true, run: stepNodeOf},
	{Name: "pick a worker without a store pod", Timeout: 30 * time.Second, Defines: true, run: stepFreeWorker},
	// A copy is Ready once it has caught up, and it first has to find itself
	// in its peers' DNS answer: CoreDNS keeps a "no such host" for up to 30 s
	// (seen on Kubernetes 1.30), so this waits as long as a deployment does.
	{Name: "pick the store pod on {node}", Timeout: 2 * time.Minute, Defines: true, run: stepStorePodOn},
	{Name: "cordon {node}", Timeout: 30 * time.Second, run: stepCordon(true)},
	{Name: "uncordon {node}", Timeout: 30 * time.Second, run: stepCordon(false)},
	{Name: "cordon every worker without a store pod", Timeout: 30 * time.Second, run: stepCordonFree},
	{Name: "uncordon every worker but {node}", Timeout: 30 * time.Second, run: stepUncordonAllBut},
	{Name: "cordon every worker but {node}", Timeout: 30 * time.Second, run: stepCordonAllBut},
	{Name: "delete pod {pod}", Timeout: 30 * time.Second, run: stepDeletePod},
	{Name: "pod {pod} is gone", Timeout: 30 * time.Second, run: stepPodGone},
	{Name: "evict pod {pod}", Timeout: 30 * time.Second, run: stepEvict},
	{Name: "evict pod {pod} is refused", Timeout: 15 * time.Second, run: stepEvictRefused},
	{Name: "evict pod {pod} is refused until deployment {name} has {n} ready pods", Timeout: 30 * time.Second, run: stepEvictRefusedUntil},
	{Name: "drain {node}", Timeout: time.Minute, run: stepDrain},
	{Name: "drain every worker in turn; before the next, deployment {name} has {n} ready pods, each that started since having held {list} when it turned ready", Timeout: 10 * time.Minute, run: stepDrainEachWorker},
	{Name: "drain {node} and {other} at the same moment", Timeout: time.Minute, run: stepDrainBoth},
	{Name: "store write {n} records", Timeout: writeTimeout, Defines: true, run: stepWrite},
	{Name: "store write {n} records through {pod}", Timeout: writeTimeout, Defines: true, run: stepWrite},
	{Name: "store write {n} records in bulk", Timeout: writeTimeout, Defines: true, run: stepWriteBulk},
	{Name: "store fill {n} MiB", Timeout: 10 * time.Minute, run: stepFill},
	{Name: "wait deployment {name} ready {n} and note the time since its restart as figure {figure}", Timeout: 10 * time.Minute, run: stepRolloutTime},
	{Name: "note the store pods that found no records on disk at start as figure {figure}", Timeout: time.Minute, run: stepFoundNothing},
	{Name: "note how store pod {pod} started as figure {figure}", Timeout: time.Minute, run: stepNoteStart},
	{Name: "store write {n} records through every store pod", Timeout: writeTimeout, Defines: true, run: stepWriteEach},
	{Name: "store write {n} records through {pod}, each on another node's disk when acknowledged", Timeout: writeTimeout, Defines: true, run: stepWriteOnAnotherDisk},
	{Name: "set deployment {name} env {key} to {value}", Timeout: 30 * time.Second, run: stepSetEnv},
	{Name: "cut every store pod off from the other store pods", Timeout: time.Minute, run: stepCutStorePods},
	{Name: "no store pod's copy holds all of {list} for {duration}", Timeout: time.Minute, run: stepNoCopyHoldsAll},
	{Name: "with every other store pod frozen, a write through {pod} is not acknowledged", Timeout: time.Minute, run: stepNotAckedAlone},
	{Name: "store overwrite {list} through {pod}", Timeout: writeTimeout, Defines: true, run: stepOverwrite},
	{Name: "every store pod serves {list}", Timeout: 30 * time.Second, run: stepEveryPodServes},
	{Name: "store pod {pod} holds {list}", Timeout: 30 * time.Second, run: stepPodHolds},
	{Name: "every store pod holds {list}", Timeout: 30 * time.Second, run: stepEveryPodHolds},
	{Name: "store pod {pod} found {cmp} {n} records on disk at start", Timeout: 30 * time.Second, run: stepFoundCount},
	{Name: "every store pod found {cmp} {n} records on disk at start", Timeout: 30 * time.Second, run: stepEveryFoundCount},
	{Name: "store pod {pod} found {list} on disk at start", Timeout: 30 * time.Second, run: stepFoundOnDisk},
	{Name: "every store pod found {list} on disk at start", Timeout: 30 * time.Second, run: stepEveryFoundOnDisk},
	{Name: "store pod {pod} held {list} when it turned ready", Timeout: 30 * time.Second, run: stepHeldWhenReady},
	{Name: "store pods run on {n} distinct nodes", Timeout: 30 * time.Second, run: stepDistinctNodes},
	{Name: "copy on {node} holds {list}", Timeout: 30 * time.Second, run: stepCopyHolds},
	{Name: "the copy on every store pod's node holds {list}", Timeout: 30 * time.Second, run: stepEveryCopyHolds},
	{Name: "the copy on each of {nodes} holds {list}", Timeout: 30 * time.Second, run: stepEachCopyHolds},
	{Name: "the copy of persistentvolume {name} on {node} holds {list}", Timeout: 30 * time.Second, run: stepCopyOfHolds},
	{Name: "copy on {node} is absent", Timeout: 30 * time.Second, run: stepCopyAbsent},
	{Name: "no node holds a copy of persistentvolume {name}", Timeout: 30 * time.Second, run: stepNoNodeHoldsCopy},
	{Name: "event {reason} on pod {pod}", Timeout: 30 * time.Second, run: stepEvent},
	{Name: "event {reason} on pod {pod} names {holder}", Timeout: 30 * time.Second, run: stepEvent},
	{Name: "event {reason} on claim {name} says {text}", Timeout: 30 * time.Second, run: stepClaimEvent},
	{Name: "event {reason} on pod {pod} says the handle must be the persistentvolume's name", Timeout: 2 * time.Minute, run: stepEventHandleNotName},
	{Name: "event {reason} on pod {pod} says mount options {options} would not reach the pod", Timeout: 2 * time.Minute, run: stepEventOptionsNotInPod},
	{Name: "event {reason} on pod {pod} says the persistentvolume is being deleted", Timeout: 30 * time.Second, run: stepEventDeleting},
	{Name: "persistentvolume {name} has a {reason} event from {node}", Timeout: 30 * time.Second, run: stepPVEventFrom},
	{Name: "pod {pod} stays pending for {duration}", Timeout: 2 * time.Minute, run: stepStaysPending},
	{Name: "no persistentvolume is bound to claim {name} for {duration}", Timeout: 2 * time.Minute, run: stepNoPVFor},
	{Name: "unbind the copy on {node} from its persistentvolume", Timeout: 30 * time.Second, run: stepUnbindCopy},
	{Name: "leave a half-done removal of the copy in the trash on {node}", Timeout: 30 * time.Second, run: stepHalfRemoved},
	{Name: "the trash on {node} holds nothing of the persistentvolume", Timeout: time.Minute, run: stepTrashEmpty},
	{Name: "back up the copy on {node}", Timeout: 30 * time.Second, run: stepBackUpCopy},
	{Name: "put the backed-up copy back on {node}", Timeout: 30 * time.Second, run: stepPutBackupBack},
	{Name: "restart the driver on {node}", Timeout: 30 * time.Second, run: stepRestartDriver},
	{Name: "restart node {node}", Timeout: 3 * time.Minute, run: stepRestartNode},
	{Name: "stop node {node}", Timeout: 30 * time.Second, run: stepStopNode},
	{Name: "start node {node}", Timeout: 3 * time.Minute, run: stepStartNode},
	{Name: "delete node {node}", Timeout: 30 * time.Second, run: stepDeleteNode},
	{Name: "no store pod is left", Timeout: 30 * time.Second, run: stepNoStorePod},
	{Name: "persistentvolume {name} is gone", Timeout: 2 * time.Minute, run: stepPVGone},
	{Name: "start writing to the store", Timeout: 30 * time.Second, Defines: true, run: stepStartWriter},
	{Name: "start writing through {pod}", Timeout: 30 * time.Second, Defines: true, run: stepStartWriter},
	{Name: "start writing through the store pods from their nodes", Timeout: 30 * time.Second, Defines: true, run: stepStartNodeWriter},
	{Name: "wait until {writer} has {n} acknowledged writes", Timeout: 3 * time.Minute, run: stepWriterAcked},
	{Name: "stop {writer} at once, keeping what it acknowledged", Timeout: 30 * time.Second, Defines: true, run: stepStopWriterKeeping},
	{Name: "stop {writer}: no acknowledged write lost, at least {n} copies served reads at every sample, never {gap} without an acknowledged write", Timeout: 30 * time.Second, run: stepStopWriter},
	{Name: "write the release {version} and load its image on every node", Timeout: 5 * time.Minute, run: stepWriteRelease},
	{Name: "uninstall the driver's chart", Timeout: 2 * time.Minute, run: stepUninstallDriver},
	{Name: "install the release's chart with its defaults", Timeout: 3 * time.Minute, run: stepInstallReleaseChart},
	{Name: "kubectl apply the release's install.yaml", Timeout: 3 * time.Minute, run: stepApplyReleaseInstall},
	{Name: "install the suite's driver again", Timeout: 3 * time.Minute, run: stepReinstallSuiteDriver},
	{Name: "install the driver from its chart without the value {value}", Timeout: 2 * time.Minute, run: stepInstallOlderChart},
	{Name: "roll the driver to a second tag of its image", Timeout: 3 * time.Minute, run: stepRollDriverSecondTag},
	{Name: "roll the driver back", Timeout: 3 * time.Minute, run: stepRollDriverBack},
	{Name: "pick the mount of {pod}", Timeout: 30 * time.Second, Defines: true, run: stepPickMount},
	{Name: "the mount {mount} is still in place", Timeout: 30 * time.Second, run: stepMountUnchanged},
	{Name: "event {reason} on pod {pod} names {holder} after the driver on {node} started", Timeout: 3 * time.Minute, run: stepEventSinceDriver},
	{Name: "kill the store container of {pod}", Timeout: 30 * time.Second, run: stepKillStoreContainer},
	{Name: "freeze the store container of {pod}", Timeout: 30 * time.Second, run: stepFreezeStoreContainer},
	{Name: "kill node {node}", Timeout: 30 * time.Second, run: stepKillNode},
	{Name: "watch the mounts of the copy on {node}", Timeout: 30 * time.Second, Defines: true, run: stepWatchMounts},
	{Name: "in {watch}, the mount of {pod} stayed until nothing used it", Timeout: 30 * time.Second, run: stepMountStayedWhileBusy},
	{Name: "stop {watch}: never more than one pod had the copy mounted", Timeout: 30 * time.Second, run: stepStopWatch},
	{Name: "force delete pod {pod}", Timeout: 30 * time.Second, run: stepForceDelete},
	{Name: "keep the mount of {pod} busy for {duration}", Timeout: 30 * time.Second, run: stepKeepMountBusy},
	{Name: "stop kubelet on {node}", Timeout: 30 * time.Second, run: stepStopKubelet},
	{Name: "start kubelet on {node}", Timeout: time.Minute, run: stepStartKubelet},
	{Name: "event {reason} on pod {pod} names {holder} after kubelet on {node} restarted", Timeout: 3 * time.Minute, run: stepEventSinceKubelet},
	{Name: "node {node} is NotReady", Timeout: 2 * time.Minute, run: stepNodeNotReady},
	{Name: "stop the API server", Timeout: 2 * time.Minute, run: stepStopAPIServer},
	{Name: "start the API server", Timeout: 3 * time.Minute, run: stepStartAPIServer},
	{Name: "freeze the driver on {node}", Timeout: 30 * time.Second, run: stepFreezeDriver},
	{Name: "thaw the driver on {node}", Timeout: 30 * time.Second, run: stepThawDriver},
	{Name: "the driver on {node} answered the publish for pod {pod} with {code}", Timeout: 3 * time.Minute, run: stepDriverRefusedWith},
	{Name: "give the copy on {node} a filesystem of its own of {mib} MiB", Timeout: 30 * time.Second, run: stepSmallFS},
	{Name: "fill the filesystem of the copy on {node}", Timeout: 30 * time.Second, run: stepFillFS},
	{Name: "free the filesystem of the copy on {node}", Timeout: 30 * time.Second, run: stepFreeFS},
	{Name: "put the copy on {node} back on the node's disk", Timeout: 30 * time.Second, run: stepDiskFS},
	{Name: "write through {pod} until a write is refused with {status}", Timeout: 2 * time.Minute, Defines: true, run: stepWriteUntilRefused},
	{Name: "the stats of {pod}'s volume show {capacity} MiB capacity and at most {available} MiB available", Timeout: 3 * time.Minute, run: stepVolumeStats},
	{Name: "every driver recovered from every error about the volume", Timeout: 30 * time.Second, run: stepDriversRecovered},
	{Name: "restart kubelet on {node}", Timeout: time.Minute, run: stepRestartKubelet},
	{Name: "persistentvolume {name} records the node of every store pod", Timeout: 30 * time.Second, run: stepPVRecordsEveryStorePodsNode},
	{Name: "persistentvolume {name} carries no per-node record for {duration}", Timeout: 2 * time.Minute, run: stepPVNoRecordFor},
	{Name: "no worker holds a copy", Timeout: 30 * time.Second, run: stepNoWorkerHoldsACopy},
	{Name: "no node of {nodes} other than {node} holds a copy", Timeout: 30 * time.Second, run: stepNoOtherNodeHoldsACopy},
	{Name: "remember the nodes of the store pods", Timeout: 30 * time.Second, Defines: true, run: stepRememberNodes},
	{Name: "persistentvolume {name} has a {reason} event from each of {nodes}", Timeout: 30 * time.Second, run: stepPVEventFromEach},
	{Name: "remove the record of {node} from persistentvolume {name}", Timeout: 30 * time.Second, run: stepRemoveRecord},
	{Name: "take the binding of admission policy {name} away until the scenario ends", Timeout: 30 * time.Second, run: stepPolicyOff},
	{Name: "node {node} holds nothing of persistentvolume {name}", Timeout: 30 * time.Second, run: stepHoldsNothingOf},
	{Name: "persistentvolume {name} records only {node}", Timeout: 30 * time.Second, run: stepPVRecordsOnly},
	{Name: "persistentvolume {name} records exactly {nodes}", Timeout: 30 * time.Second, run: stepPVRecordsExactly},
	{Name: "persistentvolume {name} records {node}", Timeout: 30 * time.Second, run: stepPVRecords},
	{Name: "the record of {node} goes from persistentvolume {name}", Timeout: 3 * time.Minute, run: stepRecordGoes},
	{Name: "as an administrator, add the records of {n} nodes that are gone to persistentvolume {name}", Timeout: 3 * time.Minute, run: stepAddGoneRecords},
	{Name: "persistentvolume {name} records {node} beside {n} others", Timeout: 2 * time.Minute, run: stepRecordedBeside},
	{Name: "clear the claim uid of persistentvolume {name}", Timeout: 30 * time.Second, run: stepClearClaimUID},
	{Name: "as the driver on {node}, changing the claimRef of persistentvolume {name} is refused", Timeout: 30 * time.Second, run: stepDriverChangesClaimRef},
	{Name: "as the driver on {node}, adding the record of {other} to persistentvolume {name} is refused", Timeout: 30 * time.Second, run: stepDriverAddsOthersRecord},
	{Name: "as the driver on {node}, labelling persistentvolume {name} {label} is refused", Timeout: 30 * time.Second, run: stepDriverLabelsPV},
	{Name: "as the driver on {node}, annotating persistentvolume {name} {label} is refused", Timeout: 30 * time.Second, run: stepDriverAnnotatesPV},
	{Name: "as the driver on {node}, deleting the record of {other} from persistentvolume {name} is refused", Timeout: 30 * time.Second, run: stepDriverRemovesOthersRecord},
	{Name: "as the driver on {node}, deleting a record of {other} that no Node owns from persistentvolume {name} is allowed", Timeout: 30 * time.Second, run: stepDriverRemovesLooseRecord},
	{Name: "as the driver on {node}, adding its own record to persistentvolume {name} without its Node as owner is refused, nor with {other} as owner", Timeout: 30 * time.Second, run: stepDriverAddsOwnRecordNotOwned},
	{Name: "as the driver on {node}, adding its own record to persistentvolume {name} with a finalizer, an annotation, a blocking owner, or the labels of {other} is refused", Timeout: 30 * time.Second, run: stepDriverAddsOwnRecordWithMore},
	{Name: "as the driver on {node}, taking the janitor's lease as {other} is refused, nor any other lease", Timeout: 30 * time.Second, run: stepDriverTakesJanitorAsOther},
	{Name: "as an administrator, add a node that sorts first and runs no driver", Timeout: 30 * time.Second, Defines: true, run: stepAddDriverlessNode},
	{Name: "the janitor's lease names a node whose driver is ready", Timeout: 2 * time.Minute, run: stepJanitorIsARunningDriver},
	{Name: "as an administrator, record {node} on persistentvolume {name}", Timeout: 30 * time.Second, run: stepAdminRecords},
	{Name: "as the driver on {node}, changing its own record of persistentvolume {name} is refused", Timeout: 30 * time.Second, run: stepDriverChangesOwnCopy},
	{Name: "as the driver on {node}, adding its own record to persistentvolume {name} is allowed", Timeout: 30 * time.Second, run: stepDriverAddsOwnRecord},
	{Name: "as the driver on {node}, putting the per-node finalizer on persistentvolume {name} is refused", Timeout: 30 * time.Second, run: stepDriverAddsOwnRecordRefused},
	{Name: "node {node} is labelled as holding a copy of persistentvolume {name}", Timeout: 30 * time.Second, run: stepNodeLabelled(true)},
	{Name: "node {node} is not labelled as holding a copy of persistentvolume {name}", Timeout: 30 * time.Second, run: stepNodeLabelled(false)},
	{Name: "the workers labelled as holding a copy of persistentvolume {name} are those that hold one", Timeout: 30 * time.Second, run: stepLabelsAreTheCopies},
	{Name: "remove the copy label of persistentvolume {name} from {node}", Timeout: 30 * time.Second, run: stepRemoveCopyLabel},
	{Name: "make deployment {deployment} prefer the nodes that hold a copy of persistentvolume {name}", Timeout: 30 * time.Second, run: stepPreferCopies},
	{Name: "as the driver on {node}, labelling {other} as holding a copy of persistentvolume {name} is refused", Timeout: 30 * time.Second, run: stepDriverLabelsOthersNode},
	{Name: "as the driver on {node}, labelling its own node {label} is refused", Timeout: 30 * time.Second, run: stepDriverLabelsOwnNodeWith},
	{Name: "as the driver on {node}, tainting its own node is refused", Timeout: 30 * time.Second, run: stepDriverTaintsOwnNode},
	{Name: "as the driver on {node}, annotating its own node {label} is refused", Timeout: 30 * time.Second, run: stepDriverAnnotatesOwnNode},
	{Name: "as the driver on {node}, labelling its own node as holding a copy of persistentvolume {name} is allowed", Timeout: 30 * time.Second, run: stepDriverLabelsOwnCopy},
	{Name: "note the driver metrics on {node}", Timeout: time.Minute, run: stepNoteMetrics},
	{Name: "the API server dispatched requests of the drivers' account at priority level {name}", Timeout: 2 * time.Minute, run: stepDispatchedAtLevel},
	{Name: "the driver on {node} counted more {series}", Timeout: 2 * time.Minute, run: stepMetricGrew},
	{Name: "the driver on {node} reports {series}", Timeout: 2 * time.Minute, run: stepMetricPresent(true)},
	{Name: "the driver on {node} reports no {series}", Timeout: 2 * time.Minute, run: stepMetricPresent(false)},
	{Name: "as the driver on {node}, writing an event in namespace {namespace} is allowed", Timeout: 30 * time.Second, run: stepDriverEventAllowed},
	{Name: "as the driver on {node}, writing an event in namespace {namespace} is refused", Timeout: 30 * time.Second, run: stepDriverEventRefused},
	{Name: "plant canaries in {dir} on {node}", Timeout: 30 * time.Second, run: stepPlantCanaries},
	{Name: "the canaries in {dir} on {node} are intact", Timeout: 30 * time.Second, run: stepCanariesIntact},
	{Name: "the mount of pod {pod} has the options {options}", Timeout: time.Minute, run: stepMountHasOptions},
	{Name: "pod {pod} sees {path} mounted with the options {options}", Timeout: 30 * time.Second, run: stepPodSeesOptions},
	{Name: "writing {file} in pod {pod} is refused: read-only file system", Timeout: 30 * time.Second, run: stepWriteInPodRefused},
	{Name: "kubelet measured the volume of pod {pod} {n} more times", Timeout: 4 * time.Minute, run: stepMeasuredAgain},
	{Name: "kubelet counts between {min} and {max} MiB used in the volume of pod {pod}", Timeout: 30 * time.Second, run: stepCountsBetween},
	{Name: "no process on {node} holds a file of persistentvolume {name} open", Timeout: 30 * time.Second, run: stepNoOpenFiles},
	{Name: "name the persistentvolume with {n} characters", Timeout: 30 * time.Second, run: stepNamePV},
})

func (r *Run) ns() string { return r.vars["ns"] }

func (r *Run) clientset() (*kubernetes.Clientset, error) {
	return kubernetes.NewForConfig(r.env.R.GetConfig())
}

// --- objects ----------------------------------------------------------------

func stepApplyFile(ctx context.Context, r *Run, a args) error {
	path := filepath.Join(r.env.Repo, a["path"])
	files := []string{path}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		files, _ = filepath.Glob(filepath.Join(path, "*.yaml"))
		sort.Strings(files)
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(r.substitute(string(raw)))), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if err.Error() == "EOF" {
					break
				}
				return fmt.Errorf("%s: %w", f, err)
			}
			if len(u.Object) > 0 {
				objs = append(objs, u)
			}
		}
	}
	return r.apply(ctx, objs)
}

// stepDeploymentReady waits until the Deployment and its pods agree: N
// replicas, N ready pods, and no pod still terminating (the Deployment's
// status lags an eviction by a moment; the pods do not).
func stepDeploymentReady(ctx context.Context, r *Run, a args) error {
	want, err := strconv.Atoi(a["n"])
	if err != nil {
		return err
	}
	return harness.Until(ctx, fmt.Sprintf("deployment %s to have %d ready pods", a["name"], want), deadline(ctx),
		func(ctx context.Context) (bool, string, error) {
			var d appsv1.Deployment
			if err := r.env.R.Get(ctx, a["name"], r.ns(), &d); err != nil {
				return false, "", harness.Unobserved(err)
			}
			var list corev1.PodList
			if err := r.listIn(ctx, r.ns(), &list, labels.SelectorFromSet(d.Spec.Selector.MatchLabels).String(), ""); err != nil {
				return false, "", err
			}
			pods := list.Items
			ready, terminating := 0, 0
			for i := range pods {
				if pods[i].DeletionTimestamp != nil {
					terminating++
				} else if harness.PodReady(&pods[i]) {
					ready++
				}
			}
			st := d.Status
			seen := fmt.Sprintf("replicas %d, updated %d, ready %d, available %d; pods: %s", st.Replicas, st.UpdatedReplicas,
				st.ReadyReplicas, st.AvailableReplicas, r.podsReport(ctx))
			// Updated: every pod is of the current template, so a rollout
			// half done (old and new pods both ready) is not "ready".
			done := st.ObservedGeneration >= d.Generation && st.AvailableReplicas == int32(want) &&
				st.UpdatedReplicas == int32(want) && st.Replicas == int32(want) && ready == want &&
				terminating == 0 && len(pods) == want
			return done, seen, nil
		})
}

func stepScale(ctx context.Context, r *Run, a args) error {
	n, err := strconv.Atoi(a["n"])
	if err != nil {
		return err
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: a["name"], Namespace: r.ns()}}
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
	return r.env.R.Patch(ctx, d, k8s.Patch{PatchType: types.MergePatchType, Data: []byte(patch)})
}

// stepRolloutRestart does what kubectl rollout restart does: it changes
// the pod template, so the Deployment rolls every pod.
func stepRolloutRestart(ctx context.Context, r *Run, a args) error {
	r.marks[restartMark(a["name"])] = time.Now()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`,
		time.Now().Format(time.RFC3339))
	return r.patchDeployment(ctx, a["name"], patch)
}

// stepNoSurge sets the rollout strategy the guide adds when a store has
// exactly as many schedulable nodes as replicas: replace, never surge.
func stepNoSurge(ctx context.Context, r *Run, a args) error {
	return r.patchDeployment(ctx, a["name"],
		`{"spec":{"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":0,"maxUnavailable":1}}}}`)
}

func (r *Run) patchDeployment(ctx context.Context, name, patch string) error {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.ns()}}
	return r.env.R.Patch(ctx, d, k8s.Patch{PatchType: types.StrategicMergePatchType, Data: []byte(patch)})
}

// --- pods and nodes ---------------------------------------------------------

func (r *Run) storePods(ctx context.Context) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := r.listIn(ctx, r.ns(), &pods, r.storeSelector(), ""); err != nil {
		return nil, err
	}
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	return pods.Items, nil
}

func (r *Run) podsReport(ctx context.Context) string {
	pods, err := r.storePods(ctx)
	if err != nil {
		return err.Error()
	}
	var s []string
	for _, p := range pods {
		state := fmt.Sprintf("%s ready=%v", p.Status.Phase, harness.PodReady(&p))
		switch {
		case p.DeletionTimestamp != nil:
			state = "terminating"
		case !harness.PodReady(&p):
			state += r.whyNotReady(ctx, &p)
		}
		s = append(s, fmt.Sprintf("%s on %q %s", p.Name, p.Spec.NodeName, state))
	}
	return strings.Join(s, "; ")
}

// whyNotReady is what holds a pod back: its container's waiting reason and
// the newest warning about it (a failed mount, a failed probe), briefly.
func (r *Run) whyNotReady(ctx context.Context, p *corev1.Pod) string {
	var why []string
	for _, c := range p.Status.ContainerStatuses {
		if w := c.State.Waiting; w != nil {
			why = append(why, c.Name+" "+w.Reason)
		}
	}
	if events, err := r.events(ctx, p.Namespace, p.Name); err == nil {
		var newest *corev1.Event
		for i, e := range events {
			if e.Type == corev1.EventTypeWarning && (newest == nil || lastSeen(e).After(lastSeen(*newest))) {
				newest = &events[i]
			}
		}
		if newest != nil {
			msg := newest.Message
			if len(msg) > 240 {
				msg = msg[:240] + "…"
			}
			why = append(why, fmt.Sprintf("last warning %s at %s: %s", newest.Reason, lastSeen(*newest).Format(time.TimeOnly), msg))
		}
	}
	if len(why) == 0 {
		return ""
	}
	return " (" + strings.Join(why, "; ") + ")"
}

// pickPod waits for a store pod that satisfies ok and names it $as.
func (r *Run) pickPod(ctx context.Context, a args, what string, ok func(*corev1.Pod) bool) error {
	return harness.Until(ctx, what, deadline(ctx), func(ctx context.Context) (bool, string, error) {
		pods, err := r.storePods(ctx)
		if err != nil {
			return false, "", err
		}
		for i := range pods {
			if ok(&pods[i]) {
				r.vars[a["as"]] = pods[i].Name
				return true, "", nil
			}
		}
		return false, r.podsReport(ctx), nil
	})
}

func stepPickStorePod(ctx context.Context, r *Run, a args) error {
	return r.pickPod(ctx, a, "a ready store pod", harness.PodReady)
}

func stepPickOtherPod(ctx context.Context, r *Run, a args) error {
	return r.pickPod(ctx, a, "a ready store pod other than "+a["pod"], func(p *corev1.Pod) bool {
		return p.Name != a["pod"] && harness.PodReady(p)
	})
}

func stepPickPendingPod(ctx context.Context, r *Run, a args) error {
	return r.pickPod(ctx, a, "a pending store pod", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodPending && p.DeletionTimestamp == nil
	})
}

func stepStorePodOn(ctx context.Context, r *Run, a args) error {
	return r.pickPod(ctx, a, "a ready store pod on "+a["node"], func(p *corev1.Pod) bool {
		return p.Spec.NodeName == a["node"] && harness.PodReady(p)
	})
}

// stepNodeOf names the node a pod is scheduled to, waiting for the
// scheduler if it has not placed the pod yet.
func stepNodeOf(ctx context.Context, r *Run, a args) error {
	return harness.Until(ctx, "pod "+a["pod"]+" to be scheduled", deadline(ctx), func(ctx context.Context) (bool, string, error) {
		var p corev1.Pod
		if err := r.env.R.Get(ctx, a["pod"], r.ns(), &p); err != nil {
			return false, "", err
		}
		r.vars[a["as"]] = p.Spec.NodeName
		return p.Spec.NodeName != "", "not scheduled: " + r.eventText(ctx, a["pod"]), nil
	})
}

func (r *Run) workers(ctx context.Context) ([]corev1.Node, error) {
	var nodes corev1.NodeList
	if err := r.env.R.List(ctx, &nodes); err != nil {
		return nil, err
	}
	var out []corev1.Node
	for _, n := range nodes.Items {
		if _, cp := n.Labels["node-role.kubernetes.io/control-plane"]; !cp {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// freeWorkers are the workers that run no store pod.
func (r *Run) freeWorkers(ctx context.Context) ([]string, error) {
	ws, err := r.workers(ctx)
	if err != nil {
		return nil, err
	}
	pods, err := r.storePods(ctx)
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	for _, p := range pods {
		used[p.Spec.NodeName] = true
	}
	var free []string
	for _, w := range ws {
		if !used[w.Name] {
			free = append(free, w.Name)
		}
	}
	return free, nil
}

func stepFreeWorker(ctx context.Context, r *Run, a args) error {
	free, err := r.freeWorkers(ctx)
	if err != nil {
		return err
	}
	if len(free) == 0 {
		return fmt.Errorf("every worker runs a store pod: %s", r.podsReport(ctx))
	}
	r.vars[a["as"]] = free[0]
	return nil
}

func stepCordon(unschedulable bool) func(context.Context, *Run, args) error {
	return func(ctx context.Context, r *Run, a args) error { return r.cordon(ctx, a["node"], unschedulable) }
}

func (r *Run) cordon(ctx context.Context, node string, unschedulable bool) error {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%v}}`, unschedulable)
	if err := r.env.R.Patch(ctx, n, k8s.Patch{PatchType: types.MergePatchType, Data: []byte(patch)}); err != nil {
		return fmt.Errorf("cordon %s: %w", node, err)
	}
	if unschedulable {
		r.lists["_cordoned"] = append(r.lists["_cordoned"], node)
	}
	return nil
}

func stepCordonFree(ctx context.Context, r *Run, _ args) error {
	free, err := r.freeWorkers(ctx)
	if err != nil {
		return err
	}
	for _, n := range free {
		if err := r.cordon(ctx, n, true); err != nil {
			return err
		}
	}
	return nil
}

func stepCordonAllBut(ctx context.Context, r *Run, a args) error {
	return r.cordonWorkersBut(ctx, a["node"], true)
}

// cordonWorkersBut cordons (or uncordons) every worker but node.
func (r *Run) cordonWorkersBut(ctx context.Context, node string, unschedulable bool) error {
	ws, err := r.workers(ctx)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(ws, func(n corev1.Node) bool { return n.Name == node }) {
		return fmt.Errorf("%s is not a worker", node)
	}
	for _, w := range ws {
		if w.Name == node {
			continue
		}
		if err := r.cordon(ctx, w.Name, unschedulable); err != nil {
			return err
		}
	}
	return nil
}

func stepDeletePod(ctx context.Context, r *Run, a args) error {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: a["pod"], Namespace: r.ns()}}
	return r.env.R.Delete(ctx, p)
}

// stepPodGone waits until the API server no longer has the pod.
func stepPodGone(ctx context.Context, r *Run, a args) error {
	return harness.Until(ctx, "pod "+a["pod"]+" to be gone", deadline(ctx), func(ctx context.Context) (bool, string, error) {
		var p corev1.Pod
		err := r.env.R.Get(ctx, a["pod"], r.ns(), &p)
		switch {
		case apierrors.IsNotFound(err):
			return true, "", nil
		case err != nil:
			return false, "", harness.Unobserved(err)
		}
		return false, fmt.Sprintf("phase %s, deleting %v", p.Status.Phase, p.DeletionTimestamp != nil), nil
	})
}

func stepDistinctNodes(ctx context.Context, r *Run, a args) error {
	want, err := strconv.Atoi(a["n"])
	if err != nil {
		return err
	}
	return harness.Until(ctx, fmt.Sprintf("ready store pods on %d distinct nodes", want), deadline(ctx), func(ctx context.Context) (bool, string, error) {
		pods, err := r.storePods(ctx)
		if err != nil {
			return false, "", err
		}
		nodes := map[string]bool{}
		for _, p := range pods {
			if harness.PodReady(&p) {
				nodes[p.Spec.NodeName] = true
			}
		}
		return len(nodes) == want && len(pods) == want, r.podsReport(ctx), nil
	})
}

func stepStaysPending(ctx context.Context, r *Run, a args) error {
	return holdsFor(ctx, a["duration"], func() error {
		var p corev1.Pod
		if err := r.env.R.Get(ctx, a["pod"], r.ns(), &p); err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodPending {
			return fmt.Errorf("pod %s is %s, expected Pending for %s; events: %s", p.Name, p.Status.Phase, a["duration"], r.eventText(ctx, p.Name))
		}
		return nil
	})
}

// holdsFor checks every second, for the duration written in the step,
// that check keeps passing.
func holdsFor(ctx context.Context, duration string, check func() error) error {
	d, err := time.ParseDuration(duration)
	if err != nil {
		return err
	}
	for end := time.Now().Add(d); time.Now().Before(end); {
		if err := check(); err != nil {
			return err
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	return nil
}

func (r *Run) eventText(ctx context.Context, name string) string {
	events, err := r.events(ctx, r.ns(), name)
	if err != nil {
		return err.Error()
	}
	var s []string
	for _, e := range events {
		s = append(s, e.Reason+": "+e.Message)
	}
	return strings.Join(s, " | ")
}

func stepEvent(ctx context.Context, r *Run, a args) error {
	what := fmt.Sprintf("a %s event on pod %s", a["reason"], a["pod"])
	mention := ""
	if h := a["holder"]; h != "" {
		mention = r.ns() + "/" + h
		what += " naming " + mention
	}
	return r.waitEvent(ctx, r.ns(), a["pod"], a["reason"], mention, what)
}

// stepClaimEvent waits for an event on a claim whose message contains a
// word of the step (one word: quote nothing).
func stepClaimEvent(ctx context.Context, r *Run, a args) error {
	what := fmt.Sprintf("a %s event on claim %s mentioning %q", a["reason"], a["name"], a["text"])
	return r.waitEvent(ctx, r.ns(), a["name"], a["reason"], a["text"], what)
}

func stepEventHandleNotName(ctx context.Context, r *Run, a args) error {
	const says = "a per-node PersistentVolume's volumeHandle must be its own name"
	what := fmt.Sprintf("a %s event on pod %s saying %q", a["reason"], a["pod"], says)
	return r.waitEvent(ctx, r.ns(), a["pod"], a["reason"], says, what)
}

func stepEventOptionsNotInPod(ctx context.Context, r *Run, a args) error {
	says := "mount options that would not reach the pod: the container runtime mounts a volume into a container with only rw or ro, and clears every other flag: " + a["options"]
	what := fmt.Sprintf("a %s event on pod %s saying %q", a["reason"], a["pod"], says)
	return r.waitEvent(ctx, r.ns(), a["pod"], a["reason"], says, what)
}

func stepHoldsNothingOf(ctx context.Context, r *Run, a args) error {
	return r.untilNoCopy(ctx, a["node"], a["name"], deadline(ctx))
}

func stepEventDeleting(ctx context.Context, r *Run, a args) error {
	const says = "the PersistentVolume is being deleted"
	what := fmt.Sprintf("a %s event on pod %s saying %q", a["reason"], a["pod"], says)
	return r.waitEvent(ctx, r.ns(), a["pod"], a["reason"], says, what)
}

// stepPVEventFrom waits for an event on a PersistentVolume (cluster-scoped:
// its events are in any namespace) that the driver on the node wrote about
// the PV of that name there is now (while there is one).
func stepPVEventFrom(ctx context.Context, r *Run, a args) error {
	what := fmt.Sprintf("a %s event on PersistentVolume %s from node %s", a["reason"], a["name"], a["node"])
	uid := ""
	if pv, err := r.pv(ctx, a["name"]); err == nil {
		uid = string(pv.UID)
	}
	return r.waitEventMatching(ctx, "", a["name"], a["reason"], what, time.Time{},
		func(e corev1.Event) bool { return fromNode(e, a["node"], uid) })
}

// fromNode says whether the driver on node wrote e (its messages start
// "node <name> " or "node <name>: "; a prefix match would take worker2's
// for worker's) about the PV of UID uid ("" for any: the PV is gone).
func fromNode(e corev1.Event, node, uid string) bool {
	rest, ok := strings.CutPrefix(e.Message, "node "+node)
	if !ok || (rest != "" && rest[0] != ' ' && rest[0] != ':') {
		return false
	}
	return uid == "" || e.InvolvedObject.UID == "" || string(e.InvolvedObject.UID) == uid
}

// waitEvent waits for an event about name with reason whose message
// contains text.
func (r *Run) waitEvent(ctx context.Context, ns, name, reason, text, what string) error {
	return r.waitEventSince(ctx, ns, name, reason, text, what, time.Time{})
}

// waitEventSince waits for such an event that last happened after since.
func (r *Run) waitEventSince(ctx context.Context, ns, name, reason, text, what string, since time.Time) error {
	return r.waitEventMatching(ctx, ns, name, reason, what, since,
		func(e corev1.Event) bool { return strings.Contains(e.Message, text) })
}

// waitEventMatching waits for an event about name with reason that last
// happened after since and that match accepts.
func (r *Run) waitEventMatching(ctx context.Context, ns, name, reason, what string, since time.Time, match func(corev1.Event) bool) error {
	return harness.Until(ctx, what, deadline(ctx), func(ctx context.Context) (bool, string, error) {
		events, err := r.events(ctx, ns, name)
		if err != nil {
			return false, "", harness.Unobserved(err)
		}
		var seen []string
		for _, e := range events {
			if e.Reason == reason && match(e) && lastSeen(e).After(since) {
				return true, "", nil
			}
			seen = append(seen, lastSeen(e).Format(time.TimeOnly)+" "+e.Reason+": "+e.Message)
		}
		return false, fmt.Sprintf("events: %s", strings.Join(seen, " | ")), nil
	})
}

func stepNoPVFor(ctx context.Context, r *Run, a args) error {
	return holdsFor(ctx, a["duration"], func() error {
		var pvs corev1.PersistentVolumeList
		if err := r.env.R.List(ctx, &pvs); err != nil {
			return err
		}
		for _, pv := range pvs.Items {
			if c := pv.Spec.ClaimRef; c != nil && c.Namespace == r.ns() && c.Name == a["name"] && pv.Status.Phase == corev1.VolumeBound {
				return fmt.Errorf("PersistentVolume %s is bound to claim %s/%s", pv.Name, r.ns(), a["name"])
			}
		}
		return nil
	})
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// deadline is what is left of a step's timeout.
func deadline(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return time.Until(d)
	}
	return time.Minute
}
