/* apparmor_internal.h - the API server's AppArmor version skew on a pod
 * (apparmor.c), run by td_admit_pod's defaulting for a bare pod; here for
 * the tests. Not for use by other modules. */
#ifndef TENANTD_APPARMOR_INTERNAL_H
#define TENANTD_APPARMOR_INTERNAL_H

#include <jansson.h>

#include "tenantd/status.h"

/* What kube-apiserver's pod create does (applyAppArmorVersionSkew), unless
 * spec.os.name is windows: for each init, regular and ephemeral container
 * without the annotation container.apparmor.security.beta.kubernetes.io/NAME,
 * sets it from the container's appArmorProfile, else the pod's (nothing
 * for a Localhost one without a profile); for each with the annotation and
 * no appArmorProfile of its own, sets the field from the annotation when
 * the annotation reads as a valid one and differs from the pod's profile.
 * pod, its metadata, metadata.annotations and spec are written in place
 * (metadata and annotations made when absent); a container list and
 * container it changes are replaced with copies, so the rest may be
 * shared with another pod. TD_OK, or TD_ENOMEM (pod then partly done). */
td_status td__pod_apparmor_skew(json_t *pod, td_err *err);

#endif
