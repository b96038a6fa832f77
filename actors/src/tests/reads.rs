//! What a maintenance does not read: what its watches deliver (the node, its pods) and what it
//! wrote itself is not asked of the API again.

use super::*;

#[tokio::test(start_paused = true)]
async fn a_maintenance_from_start_to_undo_reads_neither_its_node_nor_its_pods_nor_its_lease() {
    let (cluster, h) = nm1_succeeded(3, Duration::from_secs(30)).await;
    let status = cluster.status("nm1");
    assert_eq!(
        (status.total_pods, status.eviction_pods),
        (3, 3),
        "counted from the pod watch's first list"
    );
    assert_in_maintenance(&cluster, "n1");
    cluster.delete_maintenance("nm1");
    assert!(h.wait_gone("nm1", Duration::from_secs(10)).await);
    assert_released(&cluster, "n1");
    assert_eq!(cluster.count_calls("get_node"), 0, "{:?}", cluster.calls());
    assert_eq!(
        cluster.count_calls("get_lease"),
        0,
        "the lease is created without a read and deleted as nmo wrote it"
    );
    assert_eq!(cluster.count_calls("get_maintenance"), 0);
    assert_eq!(cluster.count_calls("list_pods"), 0, "{:?}", cluster.calls());
    assert_eq!(cluster.count_calls("watch_node"), 1);
    assert_eq!(cluster.count_calls("watch_pods"), 1);
    h.stop().await;
}
