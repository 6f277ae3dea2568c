(* T6 for n = 1: D = H/g² (coupledD_n1), and a reparameterization w = φ(w') with
   g' = φ'(w') g, H' = φ'(w')² H + φ''(w') g keeps D for every loss (every g != 0 and H) at w'
   iff φ''(w') = 0 (n1_pointwise); φ'' = 0 everywhere iff φ is affine, w' |-> s w' + a
   (n1_affine_iff; s != 0 when φ is a diffeomorphism).  n1_affine_near is the same classification with
   local hypotheses (φ and φ' derivable near x0; φ'' = 0 near x0 iff φ is affine near x0), pinned with
   the instances n1_affine_instance (φ = 3w + 1) and n1_nonaffine_instance (φ = w + w³ at x0 = 1: not
   affine near 1, and D is not kept there for every loss). *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import boolp classical_sets functions reals topology normedtype derive realfun.
From CoupledCurvature Require Import DefsAnalytic.

Section N1.
Variable R : realType.

(* in one dimension D does not depend on w: D = H / g² *)
Lemma coupledD_n1 (w g : 'cV[R]_1) (H : 'M[R]_1) :
  w 0 0 != 0 -> coupledD w g H = H 0 0 / g 0 0 ^+ 2.
Proof.
move=> w0; rewrite /coupledD /RQ /quad /sqnorm /dot !mxE !big_ord1 !mxE ?big_ord1 ?mxE.
by rewrite mulrCA mulfK ?mulf_neq0 // expr2.
Qed.

(* pointwise: with J = φ'(w') != 0 and K = φ''(w') *)
Theorem n1_pointwise (J K : R) : J != 0 ->
  (forall g H : R, g != 0 -> (J ^+ 2 * H + K * g) / (J * g) ^+ 2 = H / g ^+ 2) <-> K = 0.
Proof.
move=> J0; split => [E|-> g H g0].
  have := E 1 0 (oner_neq0 _); rewrite mulr0 add0r !mulr1 mul0r.
  by move/eqP; rewrite mulf_eq0 invr_eq0 (negbTE (expf_neq0 2 J0)) orbF => /eqP.
by rewrite mul0r addr0 exprMn invfM mulrACA mulfV ?expf_neq0 // mul1r.
Qed.

(* globally: φ'' = 0 everywhere iff φ is affine *)
Theorem n1_affine_iff (phi dphi d2phi : R^o -> R^o) :
  (forall x : R^o, is_derive x 1 phi (dphi x)) ->
  (forall x : R^o, is_derive x 1 dphi (d2phi x)) ->
  (forall x, d2phi x = 0) <-> exists s a : R, forall x, phi x = s * x + a.
Proof.
move=> D1 D2; split => [Z|[s [a A]] x].
  have C : forall x, dphi x = dphi 0.
    move=> x; apply: is_derive_0_is_cst => y.
    by apply: is_derive_eq (D2 y) _; rewrite Z.
  exists (dphi 0), (phi 0) => x.
  have P (y : R^o) : is_derive y 1 (phi - dphi 0 \*: id) 0.
    have H := is_deriveB (D1 y) (is_deriveZ (dphi 0) (is_derive_id y 1)).
    by apply: is_derive_eq H _; rewrite C [_%:A]mulr1 subrr.
  have := is_derive_0_is_cst x 0 P.
  move=> E; have E2 : phi x - dphi 0 * x = phi 0 - dphi 0 * 0 := E.
  by move: E2; rewrite mulr0 subr0 => <-; rewrite addrC subrK.
have phiE : phi = ((s \*: (id : R^o -> R^o)) + (cst a : R^o -> R^o) : R^o -> R^o).
  by apply/funext => y; rewrite A.
have Ds (y : R^o) : dphi y = s.
  have Dy : is_derive y 1 phi (s *: 1 + 0).
    by rewrite phiE; apply: is_deriveD.
  rewrite -(@derive_val _ _ _ _ _ _ _ (D1 y)) (@derive_val _ _ _ _ _ _ _ Dy).
  by rewrite addr0 [_%:A]mulr1.
have dE : dphi = cst s by apply/funext => y; rewrite Ds.
have Dx := D2 x; rewrite dE in Dx.
have Dc : is_derive x 1 (cst s : R^o -> R^o) 0 by apply: is_derive_cst.
by rewrite -(@derive_val _ _ _ _ _ _ _ Dx) (@derive_val _ _ _ _ _ _ _ Dc).
Qed.

End N1.


(* the n = 1 classification with LOCAL hypotheses: φ, φ' derivable near x0 (φ' = dphi, φ'' = d2phi
   there); then φ'' = 0 near x0 iff φ is affine near x0.  (n1_affine_iff above is the global form, with
   derivatives everywhere; it follows from this one.)  The locality lemmas: a derivative is determined
   by the function near the point (is_derive_near0), and a zero derivative near x0 makes the function
   constant near x0 (near_cst, by the mean value theorem on the segment from x0 to y). *)
Import numFieldTopology.Exports numFieldNormedType.Exports.

Section N1Local.
Variable R : realType.

Lemma is_derive_near0 (f : R -> R) (y df : R) :
  (\forall z \near y, f z = 0) -> is_derive y 1 f df -> df = 0.
Proof.
move=> f0 [_ <-]; rewrite /derive.
have fy : f y = 0 := @nbhs_singleton _ y (fun z => f z = 0) f0.
have f0' : \forall e \near (0 : R), f (y + e) = 0 := iffLR (@nbhs0P _ R (fun z => f z = 0) y) f0.
have C : (fun h : R => h^-1 *: ((f \o shift y) (h *: 1) - f y)) @ 0^' --> (0 : R).
  apply: cvg_near_cst; apply: filterS (nbhs_dnbhs f0') => h /= fh.
  by rewrite [h%:A]mulr1 (addrC h y) fh fy subrr scaler0.
exact: cvg_lim C.
Qed.


Arguments is_derive_near0 {f y df}.

Lemma cst_between (f : R -> R) (a b : R) : a <= b ->
  (forall z, a <= z -> z <= b -> is_derive z 1 f 0) -> f b = f a.
Proof.
move=> ab hz.
have [||c _] := @MVT_segment _ f (fun _ => 0) a b ab.
- by move=> z; rewrite in_itv /= => /andP[az zb]; apply: hz; rewrite Order.POrderTheory.ltW.
- apply: continuous_in_subspaceT => z; rewrite inE /= in_itv /= => /andP[az zb].
  have dz := hz z az zb.
  by apply: differentiable_continuous; apply/derivable1_diffP; exact: ex_derive.
- by rewrite mul0r => /eqP; rewrite subr_eq0 => /eqP.
Qed.

Lemma near_cst (f : R -> R) (x0 : R) :
  (\forall y \near x0, is_derive y 1 f 0) -> \forall y \near x0, f y = f x0.
Proof.
move=> /nbhs_ballP [e /= e0 He]; apply/nbhs_ballP; exists e => // y Bxy.
have inB z : `|x0 - z| <= `|x0 - y| -> is_derive z 1 f 0.
  move=> h; apply: He; move: Bxy; rewrite /ball /=.
  exact: Order.POrderTheory.le_lt_trans.
have [x0y|yx0] := Order.TotalTheory.leP x0 y.
  apply: cst_between => // z xz zy; apply: inB.
  rewrite distrC (distrC x0) !ger0_norm ?subr_ge0 //.
  by rewrite ler_add2r.
apply/esym/cst_between => [|z yz zx]; first exact: Order.POrderTheory.ltW.
apply: inB; rewrite !ger0_norm ?subr_ge0 //; last exact: Order.POrderTheory.ltW.
by rewrite ler_add2l ler_opp2.
Qed.


Arguments near_cst {f x0}.

Lemma is_derive_affine (s a y : R) : is_derive y 1 (fun z : R => s * z + a) s.
Proof.
have D : is_derive y 1 ((s \*: (id : R -> R)) + cst a) (s *: 1 + 0).
  exact: is_deriveD.
by apply: is_derive_eq D _; rewrite addr0 [_%:A]mulr1.
Qed.

Theorem n1_affine_near (phi dphi d2phi : R -> R) (x0 : R) :
  (\forall y \near x0, is_derive y 1 phi (dphi y)) ->
  (\forall y \near x0, is_derive y 1 dphi (d2phi y)) ->
  (\forall y \near x0, d2phi y = 0) <-> exists s a : R, \forall y \near x0, phi y = s * y + a.
Proof.
move=> D1 D2; split => [Z|[s [a A]]].
  have C : \forall y \near x0, dphi y = dphi x0.
    by apply: near_cst; apply: filterS2 D2 Z => y Dy Zy; exact: is_derive_eq Dy Zy.
  exists (dphi x0), (phi x0 - dphi x0 * x0).
  have P : \forall y \near x0, is_derive y 1 (phi - (fun z => dphi x0 * z + 0)) 0.
    apply: filterS2 D1 C => y Dy Cy.
    by apply: is_derive_eq (is_deriveB Dy (is_derive_affine _ _ _)) _; rewrite Cy subrr.
  move: (near_cst P); apply: filterS => y /=.
  move=> E; have {E} : phi y - (dphi x0 * y + 0) = phi x0 - (dphi x0 * x0 + 0) := E.
  by rewrite !addr0 => /eqP; rewrite subr_eq => /eqP ->; rewrite addrC.
have S : \forall y \near x0, dphi y = s.
  apply: filterS2 D1 (near_join A) => y Dy Ay; apply/eqP; rewrite -subr_eq0; apply/eqP.
  apply: (is_derive_near0 _ (is_deriveB Dy (is_derive_affine s a y))).
  by apply: filterS Ay => z Az; rewrite -[LHS]/(phi z - (s * z + a)) Az subrr.
have S' := near_join S.
move: D2 S'; apply: filterS2 => y Dy Sy.
rewrite -[d2phi y]subr0; apply: (is_derive_near0 _ (is_deriveB Dy (is_derive_cst s y 1))).
by apply: filterS Sy => z Sz; rewrite -[LHS]/(dphi z - s) Sz subrr.
Qed.


Lemma n1_affine_instance (x0 : R) :
  [/\ \forall y \near x0, is_derive y 1 (fun w : R => 3 * w + 1) 3,
      \forall y \near x0, is_derive y 1 (fun _ : R => 3 : R) 0
    & exists s a : R, \forall y \near x0, 3 * y + 1 = s * y + a].
Proof.
split; first by apply: filterE => y; exact: is_derive_affine.
  by apply: filterE => y; exact: is_derive_cst.
by exists 3, 1; exact: filterE.
Qed.

End N1Local.

(* non-vacuity: φ = id (φ' = 1, φ'' = 0) satisfies the hypotheses of n1_affine_iff, and
   J = 1 those of n1_pointwise *)
Lemma n1_instance (R : realType) :
  [/\ forall x : R^o, is_derive x 1 (id : R^o -> R^o) (cst 1 x),
      forall x : R^o, is_derive x 1 (cst 1 : R^o -> R^o) (cst 0 x) & (1 : R) != 0].
Proof.
split => [x|x|]; last exact: oner_neq0.
- exact: is_derive_id.
- exact: is_derive_cst.
Qed.

(* instance of n1_pointwise: the affine reparameterization φ(w') = 2w' + a (J = 2, K = φ'' = 0)
   keeps D = H/g² for every g <> 0 and H *)
Lemma n1_pointwise_instance (R : realType) (g H : R) : g != 0 ->
  ((2 : R) ^+ 2 * H + 0 * g) / (2 * g) ^+ 2 = H / g ^+ 2.
Proof.
have t0 : (2 : R) != 0 by rewrite pnatr_eq0.
by move: g H; apply/(@n1_pointwise R 2 0 t0).
Qed.

(* instances of n1_affine_near: (a) the affine φ(w) = 3w + 1 (φ' = 3, φ'' = 0) meets its hypotheses at
   every x0, with both sides true; (b) φ(w) = w + w³ (φ' = 1 + 3w², φ'' = 6w) meets them at x0 = 1, where
   φ'' = 6 <> 0, so φ is not affine near 1, and (n1_pointwise, J = φ'(1) = 4, K = φ''(1) = 6) D is not kept
   for every loss: e.g. g = H = 1 gives D = 1 before and (16 + 6)/16 = 11/8 after. *)
Section N1LocalInstances.
Variable R : realType.

Lemma n1_nonaffine_instance :
  [/\ \forall y \near (1 : R), is_derive y 1 (fun w : R => w + w ^+ 3) (1 + 3 * y ^+ 2),
      \forall y \near (1 : R), is_derive y 1 (fun w : R => 1 + 3 * w ^+ 2) (6 * y),
      ~ (exists s a : R, \forall y \near (1 : R), y + y ^+ 3 = s * y + a)
    & ~ (forall g H : R, g != 0 -> (4 ^+ 2 * H + 6 * g) / (4 * g) ^+ 2 = H / g ^+ 2)].
Proof.
have D1 (y : R) : is_derive y 1 (fun w : R => w + w ^+ 3) (1 + 3 * y ^+ 2).
  have D : is_derive y 1 (id + id ^+ 3 : R -> R) (1 + (3%:R * id y ^+ 2) *: 1) by apply: is_deriveD.
  by apply: is_derive_eq D _; rewrite [_%:A]mulr1.
have D2 (y : R) : is_derive y 1 (fun w : R => 1 + 3 * w ^+ 2) (6 * y).
  have D : is_derive y 1 (cst 1 + 3 \*: id ^+ 2 : R -> R) (0 + 3 *: ((2%:R * id y ^+ 1) *: 1)).
    by apply: is_deriveD.
  by apply: is_derive_eq D _; rewrite add0r [_%:A]mulr1 expr1 [_ *: _]mulrA -natrM.
have N : ~ (exists s a : R, \forall y \near (1 : R), y + y ^+ 3 = s * y + a).
  have N1 : \forall y \near (1 : R), is_derive y 1 (fun w : R => w + w ^+ 3) (1 + 3 * y ^+ 2).
    exact: filterE.
  have N2 : \forall y \near (1 : R), is_derive y 1 (fun w : R => 1 + 3 * w ^+ 2) (6 * y).
    exact: filterE.
  move/(iffRL (@n1_affine_near R (fun w : R => w + w ^+ 3) (fun w : R => 1 + 3 * w ^+ 2)
                                (fun w : R => 6 * w) 1 N1 N2)) => Z.
  have := @nbhs_singleton _ 1 (fun y : R => 6 * y = 0) Z.
  by move/eqP; rewrite mulr1 pnatr_eq0.
split => //; [exact: filterE | exact: filterE |].
have t4 : (4 : R) != 0 by rewrite pnatr_eq0.
by move/(@n1_pointwise R 4 6 t4)/eqP; rewrite pnatr_eq0.
Qed.

End N1LocalInstances.

(* instances of the global n1_affine_iff (derivatives at every x, as it assumes): (a) φ(w) = 3w + 1
   (φ' = 3, φ'' = 0) meets its hypotheses and is affine; (b) φ(w) = w + w³ (φ' = 1 + 3w², φ'' = 6w)
   meets them too, and since φ''(1) = 6 ≠ 0 it is not affine on R. *)
Section N1GlobalInstance.
Variable R : realType.

Lemma n1_affine_iff_instance :
  [/\ (forall x : R^o, is_derive x 1 (fun w : R^o => 3 * w + 1 : R^o) 3) /\
      (forall x : R^o, is_derive x 1 (fun _ : R^o => 3 : R^o) 0),
      exists s a : R, forall x : R^o, 3 * x + 1 = s * x + a,
      forall x : R^o, is_derive x 1 (fun w : R^o => w + w ^+ 3 : R^o) (1 + 3 * x ^+ 2),
      forall x : R^o, is_derive x 1 (fun w : R^o => 1 + 3 * w ^+ 2 : R^o) (6 * x)
    & ~ (exists s a : R, forall x : R^o, x + x ^+ 3 = s * x + a)].
Proof.
have A1 (y : R^o) : is_derive y 1 (fun w : R^o => 3 * w + 1 : R^o) 3.
  have D : is_derive y 1 (3 \*: id + cst 1 : R^o -> R^o) (3 *: 1 + 0) by apply: is_deriveD.
  by apply: is_derive_eq D _; rewrite addr0 [_ *: _]mulr1.
have A2 (y : R^o) : is_derive y 1 (fun _ : R^o => 3 : R^o) 0 by exact: is_derive_cst.
have D1 (y : R^o) : is_derive y 1 (fun w : R^o => w + w ^+ 3 : R^o) (1 + 3 * y ^+ 2).
  have D : is_derive y 1 (id + id ^+ 3 : R^o -> R^o) (1 + (3%:R * id y ^+ 2) *: 1) by apply: is_deriveD.
  by apply: is_derive_eq D _; rewrite [_%:A]mulr1.
have D2 (y : R^o) : is_derive y 1 (fun w : R^o => 1 + 3 * w ^+ 2 : R^o) (6 * y).
  have D : is_derive y 1 (cst 1 + 3 \*: id ^+ 2 : R^o -> R^o) (0 + 3 *: ((2%:R * id y ^+ 1) *: 1)).
    by apply: is_deriveD.
  by apply: is_derive_eq D _; rewrite add0r [_%:A]mulr1 expr1 [_ *: _]mulrA -natrM.
split => //; first by exists 3, 1.
move/(iffRL (@n1_affine_iff R (fun w : R^o => w + w ^+ 3 : R^o) (fun w : R^o => 1 + 3 * w ^+ 2 : R^o)
                              (fun w : R^o => 6 * w : R^o) D1 D2)) => /(_ 1) /eqP.
by rewrite mulr1 pnatr_eq0.
Qed.

End N1GlobalInstance.
