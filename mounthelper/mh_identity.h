/* The helper's own identity beside its capable core (mh_identity.c). */
#ifndef SEPCSI_MH_IDENTITY_H
#define SEPCSI_MH_IDENTITY_H

#include <stdbool.h>
#include <sys/types.h>

/*
 * The directory of images dirfd (images/ or snapshots/), and with files every
 * regular file of one name in it, handed to uid, group root: 02750 and 0660
 * for another uid than root (the core reaches them through the group), 0700
 * and 0600 for root. Fatal if the directory cannot be; a file that cannot is
 * logged and left (false).
 */
bool mh_identity_hand_images(int dirfd, uid_t uid, bool files);

/*
 * Whether data_fd's record says the images were handed to uid whole; record
 * that they now are (a failure is logged: the next start walks them again).
 */
bool mh_identity_handed(int data_fd, uid_t uid);
void mh_identity_record(int data_fd, uid_t uid);

/*
 * Become uid:gid (no supplementary group), keeping the capabilities held now
 * for the confinement that follows; verified; the parent-death signal (which
 * the change clears) set again. Fatal if it cannot.
 */
void mh_identity_take(uid_t uid, gid_t gid);

#endif
