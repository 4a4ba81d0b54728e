"""Structural distance between memory programs: ``tree`` (source to labelled tree, at three levels of
abstraction), ``ted`` (exact tree edit distance), ``matrix`` (a population's distances, whole or in
blocks) and ``clusters`` (k-medoids, silhouette, classical MDS on a distance matrix). No Ray here: the
Ray tasks that spread a matrix over a cluster are in ``mstar_ray.actors.structure_tasks``."""
